"""The stopper: deletes a held workload's Jobs when a transition asks for it (a
`records.StopJobs` effect), and lets what follows the stop (the report that the Jobs are
gone: the hub may then run the workload elsewhere) happen only once they really are gone.

A stop goes one of four ways:
- at once, in the admission loop: a withdrawal, a fence (the quota given back is someone
  else's at once, so nothing may keep running beside it);
- logs alongside (`LogShip.ALONGSIDE`: an eviction, a preemption, when agent.app gave the
  `open_logs` and `before_stop` hooks): the ship's reads are opened first (tightly bounded),
  the Jobs deleted at once, and the reports that follow wait in the background until the ship
  read the terminating pods to their end (bounded: the hub takes a generation's lines only
  while it is bound here); the rest (the record persisted) goes on at once;
- logs first (`LogShip.BEFORE`, a cancel, when agent.app gave a `before_stop` hook): in a
  background task the logs are shipped (bounded), then the Jobs deleted, then the rest
  applied; `hurry` (a withdrawal, a fence) cuts the shipping short;
- again and again in the background, when the cluster's API fails beyond the client's
  retries, until the Jobs are gone.

While a background stop is on, its workload is `stopping`: the reaper leaves its Jobs alone
(`reap_spared`), and a report of that generation repeats what the stop will report once
the Jobs are gone (`repeats_stop`). Those decisions are pure functions, tested alone.

Called by: agent.admission (`AdmissionShell` hands it every StopJobs with the effects after
it; its reaper asks what to spare); agent.app sets `before_stop`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any

from agent.inventory import Inventory
from agent.jobset_driver import JobSetDriver, jobset_policy
from agent.materialize import Materializer
from agent.records import Effect, LogShip, Record, Report, StopJobs
from agent.retry import K8S_TRANSIENT

__all__ = ["BeforeStop", "OpenLogs", "Stopper", "reap_spared", "repeats_stop", "ships_logs_first"]

log = logging.getLogger(__name__)

BeforeStop = Callable[[str, int, asyncio.Event, bool], Awaitable[None]]
"""Awaited before a cancelled workload's Jobs are deleted, and after an evicted one's, with
its key, generation, an event set to cut it short and whether the Jobs are gone already
(agent.app: the logs are shipped, bounded)."""

OpenLogs = Callable[[str, int], Awaitable[bool]]
"""Awaited in the admission loop before an evicted workload's Jobs are deleted, with its key
and generation: starts shipping its logs and returns once the ship's reads hold them
(agent.app: tightly bounded); whether a ship is on."""

FollowUp = Callable[[str, Record | None, Sequence[Effect]], Awaitable[None]]
"""Applies the effects that follow a stop (agent.admission `_effects`)."""


def ships_logs_first(stop: StopJobs, record: Record | None, has_hook: bool) -> bool:
    """Does this stop ship the workload's logs before its Jobs go? Only when the transition
    asks for it (a cancel) and something can ship them."""
    return stop.logs is LogShip.BEFORE and record is not None and has_hook


def repeats_stop(stopping_generation: int | None, generation: int) -> bool:
    """Is a report of `generation` a repeat of what a background stop (of
    `stopping_generation`, None: none on) reports once the Jobs are gone?"""
    return stopping_generation is not None and stopping_generation >= generation


def reap_spared(held: Mapping[str, Record], stopping: Collection[str]) -> set[str]:
    """The workloads whose Jobs the orphan reaper leaves alone: the held generations not
    given back (one given back must not keep running: its stop may have failed), and those a
    background stop is on for (it ships their logs first)."""
    return {key for key, record in held.items() if not record.given_back} | set(stopping)


class Stopper:
    def __init__(
        self,
        materializer: Materializer,
        inventory: Inventory,
        jobsets: JobSetDriver,
        *,
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
        follow_up: FollowUp,
        wake: Callable[[], None],
    ) -> None:
        self.materializer = materializer
        self.inventory = inventory
        self.jobsets = jobsets
        self.spawn = spawn
        self.follow_up = follow_up
        self.wake = wake
        self.before_stop: BeforeStop | None = None
        self.open_logs: OpenLogs | None = None
        self.stopping: dict[str, tuple[int, asyncio.Event]] = {}
        """Workloads (→ generation) whose Jobs a background stop ships the logs of and then
        deletes, with the event that cuts the shipping short."""

    async def stop(
        self, key: str, record: Record | None, stop: StopJobs, after: Sequence[Effect]
    ) -> bool:
        """Stop the Jobs. True: the stop went on in the background, which applies `after`
        itself once the Jobs are gone; False: they are gone, the caller goes on."""
        if ships_logs_first(stop, record, self.before_stop is not None):
            assert record is not None
            # Never in the loop: the stop and what follows it go on in the background.
            self.stopping[key] = (record.generation, asyncio.Event())
            self.spawn(self._stop_after_shipping(key, record, stop, after), f"stop {key}")
            return True
        shipping = (
            stop.logs is LogShip.ALONGSIDE
            and record is not None
            and self.open_logs is not None
            and self.before_stop is not None
            and await self.open_logs(key, record.generation)
        )
        namespace, name = key.split("/", 1)
        jobs = self.inventory.workload_objects(namespace, name)
        try:
            await self.materializer.stop(namespace, name, jobs, stop.job_names)
        except K8S_TRANSIENT as exc:
            # The cluster's API is failing beyond the client's retries. What follows a stop
            # is the report that the Jobs are gone: it waits until they really are.
            log.warning("stopping %s: %s; retrying in the background", key, exc)
            self.spawn(self._keep_stopping(key, record, stop, after), f"stop {key}")
            return True
        self._drop_service(key, record)
        if shipping and record is not None:
            # The Jobs are gone; the reports wait for the ship (bounded), since the hub takes
            # a generation's lines only while it is bound here (`repeats` holds them back
            # meanwhile). What else follows (the record persisted) goes on now.
            self.stopping[key] = (record.generation, asyncio.Event())
            reports = [e for e in after if isinstance(e, Report)]
            self.spawn(self._report_after_shipping(key, record, reports), f"ship {key}")
        return False

    def hurry(self, key: str) -> None:
        """A withdrawal must stop at once: a stop shipping logs stops waiting."""
        if (stopping := self.stopping.get(key)) is not None:
            stopping[1].set()

    def hurry_all(self) -> None:
        """A fence: every stop shipping logs stops waiting."""
        for key in list(self.stopping):
            self.hurry(key)

    def repeats(self, key: str, generation: int) -> bool:
        """A background stop of this generation (or a later one) of the workload is on."""
        stopping = self.stopping.get(key)
        return repeats_stop(stopping[0] if stopping is not None else None, generation)

    def _drop_service(self, key: str, record: Record | None) -> None:
        if record is not None and jobset_policy(record) is not None:
            self.spawn(self.jobsets.delete_service(record), f"jobset service {key}")

    async def _keep_stopping(
        self, key: str, record: Record | None, stop: StopJobs, after: Sequence[Effect]
    ) -> None:
        namespace, name = key.split("/", 1)
        await self.materializer.stop_for_good(namespace, name, stop.job_names)
        self._drop_service(key, record)  # as the other two ways do: a JobSet's Service too
        await self.follow_up(key, record, after)
        self.wake()

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
        self._drop_service(key, record)
        await self.follow_up(key, record, after)
        self.wake()

    async def _report_after_shipping(
        self, key: str, record: Record, reports: Sequence[Effect]
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
        await self.follow_up(key, record, reports)
