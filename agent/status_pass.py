"""The status pass of the admission loop: the records' timers that are due, then a look at
the held workloads whose Jobs or pods changed, and at those whose Jobs were made since the
last pass (agent.job_making `take_made`: `on_materialized` and the look are one record
change). A look reads a workload's mirrored Jobs and pods as an observation (agent.status),
lets agent.jobset_driver advance a JobSet's Jobs (a restart is a transition of its own), and
hands the sighting to `records.next_report`, which decides what to report; the gated pods of
a workload still running are then landed in their topology domains (agent.topology_landing).

Which workloads a pass looks at is `keys_to_look_at` (pure): only those whose Jobs or pods
changed, and those whose timer came, so a pass costs what changed, not what is held; all of
them after a relist or when priming (the mirrors were just listed, so a missing Job is
really missing).

Called by: agent.admission (`AdmissionShell.observe`, every pass and once after a restart).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Set
from typing import Any

from agent import records
from agent.book import Book
from agent.inventory import Inventory
from agent.jobset_driver import JobSetDriver
from agent.records import Cadence, Effect, Record, Step
from agent.status import observe
from agent.topology_landing import TopologyLander

__all__ = ["StatusPass", "keys_to_look_at"]


def _goes_with_the_look(step: Step) -> bool:
    """Whether a timer's step can wait for the look this pass gives its record: it has no
    effects, and its record is one a status pass looks at."""
    return step.record is not None and not step.effects and records.observable(step.record)


def keys_to_look_at(
    held: Collection[str], everything: bool, timed: Set[str], changed: Set[str]
) -> list[str]:
    """The held workloads a status pass looks at: all of them (`everything`: after a relist,
    or priming), else those whose timer came and those whose Jobs or pods changed, in order."""
    return list(held) if everything else sorted(timed | changed)


class StatusPass:
    def __init__(
        self,
        *,
        book: Book,
        inventory: Inventory,
        jobsets: JobSetDriver,
        lander: TopologyLander,
        cadence: Cadence,
        apply: Callable[[str, Step], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
        take_made: Callable[[], Mapping[str, tuple[Record, tuple[str, ...]]]],
        given_up: Callable[[Record], None],
    ) -> None:
        self.book = book
        self.inventory = inventory
        self.jobsets = jobsets
        self.lander = lander
        self.cadence = cadence
        self.apply = apply
        self.spawn = spawn
        self.take_made = take_made
        """Jobs made since the last pass (agent.job_making `JobMaker.take_made`)."""
        self.given_up = given_up
        """Deletes the Jobs made for a record that moved on before the pass."""

    async def run(self, now: float, *, priming: bool = False) -> None:
        made = self.take_made()
        timed = set(made)
        # A timer that only changes a record this pass looks at (a look-again time cleared)
        # is applied with the look, as one transition: the look goes on from the record
        # `on_timer` makes of what is held then.
        with_the_look = set()
        for due in list(self.book.due(now)):
            step = records.on_timer(due, now, self.cadence)
            if _goes_with_the_look(step):
                with_the_look.add(due.key)
            else:
                await self.apply(due.key, step)
            if step.record is not None:
                timed.add(due.key)
        relisted, owners = self.inventory.take_changes()
        held = self.book.records
        for key in keys_to_look_at(held, priming or relisted, timed, self.book.owned_by(owners)):
            record = held.get(key)
            looked_from = record
            effects: tuple[Effect, ...] = ()
            if record is not None and key in with_the_look:
                step = records.on_timer(record, now, self.cadence)
                if _goes_with_the_look(step):
                    looked_from = step.record
                else:  # (the record changed since its timer came)
                    await self.apply(key, step)
                    looked_from = record = held.get(key)
            if key in made:
                started, job_names = made[key]
                if looked_from is not None and records.awaits_jobs(looked_from, started):
                    # The look goes on from the record with its Jobs, and what it makes of
                    # it is saved with them.
                    materialized = records.on_materialized(looked_from, job_names)
                    looked_from, effects = materialized.record, materialized.effects
                else:
                    self.given_up(started)
            if record is not None and looked_from is not None and records.observable(looked_from):
                await self._look(key, looked_from, now, priming, held=record, effects=effects)
            elif effects:  # (its Jobs made, yet nothing to look at: saved all the same)
                await self.apply(key, Step(looked_from, effects))

    async def _look(
        self,
        key: str,
        record: Record,
        now: float,
        priming: bool,
        *,
        held: Record,
        effects: tuple[Effect, ...] = (),
    ) -> None:
        """Look at `record`'s Jobs and pods (`held`: what the book holds for it, of which
        `record` may be a change not applied yet — a timer's, its Jobs made — whose
        `effects` go with the look's)."""
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
            self.spawn(work, f"jobset {key}")
        if restart is not None and restart.record is not None:
            await self.apply(key, Step(restart.record, (*effects, *restart.effects)))
            record = held = restart.record
            effects = ()
        exist = self.jobsets.busy(key) or self.inventory.made(namespace, record.job_names)
        step = records.next_report(
            record, records.Sighting(observation, exist, priming), now, self.cadence
        )
        if step.record is not held or step.effects or effects:
            await self.apply(key, Step(step.record, (*effects, *step.effects)))
        if (now_held := self.book.records.get(key)) is not None and records.observable(now_held):
            status = now_held.workload.status
            self.lander.land_workload(
                status.admission if status else None,
                now_held.generation,
                self.inventory.workload_pods(namespace, name),
            )
