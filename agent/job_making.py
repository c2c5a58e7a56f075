"""Making an admitted workload's Jobs: `JobMaker.make` plans them (`plan_for`: none without
the lease), creates them through agent.materialize in a task of its own (it does I/O), and
applies the outcome to the record only if the record still awaits the Jobs of the attempt
(`records.awaits_jobs`): denied by RBAC (`on_materialize_denied`, and tried again after
`retry_after`), failed (`on_materialize_failed`); made, the Jobs' names wait for the next
status pass (`take_made`), which applies `on_materialized` with its look at the new Jobs as
one record change; given up meanwhile, what the attempt made of that generation is deleted.

It owns the JobSet driver (agent.jobset_driver), which makes a JobSet's later roles, as their
start order allows, through `plan_for`.

Called by: agent.admission (a `records.Materialize` effect starts `make`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from agent import records
from agent.errors import K8sClientError, K8sForbiddenError, MaterializeError
from agent.inventory import Inventory
from agent.jobset_driver import JobSetDriver, jobset_policy, started_roles
from agent.k8s.client import JsonObject
from agent.lease import Lease
from agent.materialize import Materializer, plan_jobs
from agent.records import Record, Step
from agent.tracing import AgentTracing
from api.v1alpha1.queues import ResourceFlavor

__all__ = ["JobMaker", "made_job_names"]

log = logging.getLogger(__name__)


def made_job_names(record: Record, created: Sequence[str]) -> tuple[str, ...]:
    """The Jobs a made workload has: those created, or for a JobSet every Job it will have,
    started or not (its later roles start as their order allows)."""
    policy = jobset_policy(record)
    if policy is None:
        return tuple(created)
    return tuple(n for role in policy.roles for n in policy.job_names(role))


class JobMaker:
    def __init__(
        self,
        *,
        held: Mapping[str, Record],
        materializer: Materializer,
        inventory: Inventory,
        lease: Lease,
        flavors: Callable[[], Sequence[ResourceFlavor]],
        tracing: AgentTracing,
        apply: Callable[[str, Step], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
        wake: Callable[[], None],
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        retry_after: float,
    ) -> None:
        self.held = held
        self.materializer = materializer
        self.inventory = inventory
        self.lease = lease
        self.flavors = flavors
        self.tracing = tracing
        self.apply = apply
        self.spawn = spawn
        self.wake = wake
        self.clock = clock
        self.monotonic = monotonic
        self.retry_after = retry_after
        self.jobsets = JobSetDriver(materializer, self.plan_for)
        self._made: dict[str, tuple[Record, tuple[str, ...]]] = {}
        """Jobs made since the last status pass: the record they were made for, their names."""

    def _current(self, started: Record) -> Record | None:
        record = self.held.get(started.key)
        return record if records.awaits_jobs(record, started) else None

    def take_made(self) -> dict[str, tuple[Record, tuple[str, ...]]]:
        """The Jobs made since the last call, by workload: the record they were made for and
        their names (`records.on_materialized` of the record, if it still awaits them)."""
        made, self._made = self._made, {}
        return made

    def given_up(self, started: Record) -> None:
        """The record Jobs were made for moved on (withdrawn, offered anew) before the status
        pass took them: delete them, in the background."""
        self.spawn(self._delete_attempt(started), f"delete {started.key} given up")

    async def _delete_attempt(self, started: Record) -> None:
        """Delete what the making for `started` made (of its generation only)."""
        namespace, name = started.key.split("/", 1)
        uid = started.workload.metadata.uid
        await self.materializer.delete_all(namespace, name, uid, generation=started.generation)

    def plan_for(
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
        namespace, name = record.key.split("/", 1)
        if roles is None and jobset_policy(record) is not None:
            roles = started_roles(record, self.inventory.workload_jobs(namespace, name))
        return plan_jobs(
            record.workload,
            record.offer.generation,
            record.offer.source,
            status.admission,
            {f.metadata.name: f for f in self.flavors()},
            self.lease.job_deadline(now),
            cluster=self.materializer.cluster,
            roles=roles,
            attempts=dict(record.jobset_attempts),
        )

    async def _make_later(self, started: Record) -> None:
        await asyncio.sleep(self.retry_after)
        if self._current(started) is not None:
            await self.make(started)

    async def make(self, started: Record) -> None:
        def plan() -> list[JsonObject] | None:
            return self.plan_for(started)

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
                await self.apply(key, records.on_materialize_denied(record, str(exc), self.clock()))
                self.spawn(self._make_later(started), f"materialize {key} again")
            return
        except (MaterializeError, K8sClientError) as exc:
            if (record := self._current(started)) is not None:
                log.error("cannot materialise %s: %s", key, exc)
                await self.apply(key, records.on_materialize_failed(record, str(exc)))
                self.wake()
            return
        if names is not None and (record := self._current(started)) is not None:
            if jobset_policy(record) is not None:
                await self.jobsets.ensure_service(record)
            # Not applied here: the next status pass looks at the new Jobs anyway, and a
            # record change of its own would cost another book write and snapshot refresh.
            earlier = self._made.get(key)
            if earlier is not None and earlier[0].offer is not started.offer:
                self.given_up(earlier[0])  # (an offer the record moved on from since)
            self._made[key] = (started, made_job_names(record, names))
            self.wake()
            return
        # Given up meanwhile: delete what this attempt may have made.
        await self._delete_attempt(started)
