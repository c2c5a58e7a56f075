"""The held workloads' records, and the indexes derived from them — kept together, so that
putting or deleting a record is the only way any of them changes.

`Book.put(key, record)` stores a record (None: forgets the workload) and keeps up to date:
which workloads a Job or pod change is for (by the (namespace, name label) their objects
carry), when each record's next timer is due (`agent.records.wakeup`, a heap whose stale
entries are skipped, so a pass costs what is due, not what is held), which records the next
engine snapshot must look at again, which finished with Jobs (whose logs the log shipper
ships: it looks at those, not at every held record), which run here (`running`: the fencing
deadlines and the lost-node checks look at those), which were admitted and not reported yet
(capacity reports list them), and which must be saved or deleted at the end of the pass.
It returns what the change means for admission (`Put`). No I/O, no clock.

Called by: agent.admission (every transition goes through `put`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agent.labels import Labels
from agent.records import Cadence, Record, observable, wakeup
from api.v1alpha1.messages import HeldWorkload, WorkloadPhase, WorkloadStatusReport

__all__ = ["Book", "Put"]


@dataclass(frozen=True, slots=True)
class Put:
    """What a `put` changed for admission."""

    arrived: bool = False
    """A workload newly held (it may be admitted)."""
    freed: bool = False
    """Quota was released: the workload was forgotten, finished, or given back."""


def owner(key: str) -> tuple[str, str]:
    """The (namespace, name label) that the Jobs and pods of workload `key` carry."""
    namespace, name = key.split("/", 1)
    return namespace, Labels.value(name)


class Book:
    def __init__(self, cadence: Cadence) -> None:
        self.cadence = cadence
        self.records: dict[str, Record] = {}
        self._by_owner: dict[tuple[str, str], set[str]] = {}
        self._timers: list[tuple[float, str]] = []
        self._changed: set[str] = set()
        self._finished: set[str] = set()
        """Keys put finished with Jobs since the last `take_finished`."""
        self._dirty: dict[str, str | bool | None] = {}
        """Per key to write at the end of the pass: the state alone (False), with the offer
        encoded (True) or as this text (str), or a deletion (None)."""
        self.unreported: set[str] = set()
        """The keys of the records admitted here whose report waits for their pods
        (`Record.unreported_since`): capacity reports list them as answered offers."""
        self.running: dict[str, None] = {}
        """The keys of the records a status pass looks at (`records.observable`: admitted or
        running, with Jobs), in the order they became so (a dict as an ordered set): a deep
        queue holds thousands more that wait, which these walks need not see."""

    def put(self, key: str, record: Record | None) -> Put:
        old = self.records.get(key)
        if record is old:
            return Put()
        self._changed.add(key)
        if record is None:
            del self.records[key]
            keys = self._by_owner.get(owner(key))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[owner(key)]
            self._dirty[key] = None
            self._finished.discard(key)
            self.running.pop(key, None)
            self.unreported.discard(key)
            return Put(freed=True)
        self.records[key] = record
        if record.unreported_since is not None and record.phase is WorkloadPhase.ADMITTED:
            self.unreported.add(key)
        else:
            self.unreported.discard(key)
        if observable(record):
            self.running.setdefault(key, None)
        else:
            self.running.pop(key, None)
        if record.finished and record.job_names:
            self._finished.add(key)
        if old is None:
            self._by_owner.setdefault(owner(key), set()).add(key)
        when = wakeup(record, self.cadence)
        if when is not None and (old is None or wakeup(old, self.cadence) != when):
            heapq.heappush(self._timers, (when, key))
        finished = old is not None and record.settled and not old.settled
        return Put(arrived=old is None, freed=finished)

    def persist(self, key: str, *, with_offer: bool, offer_text: str | None = None) -> None:
        """Save the record at the end of the pass (its offer too, when `with_offer`: as
        `offer_text` when given, the text it came in)."""
        if with_offer:
            self._dirty[key] = True if offer_text is None else offer_text
        elif not self._dirty.get(key):
            self._dirty[key] = False

    def take_writes(self) -> tuple[list[tuple[str, str | None, str]], list[str]]:
        """What to save — (key, offer JSON or None, state JSON) — and what to delete."""
        saves, deletes = [], []
        for key, offer in self._dirty.items():
            record = self.records.get(key)
            if offer is None or record is None:
                deletes.append(key)
            else:
                text = offer if isinstance(offer, str) else record.offer_json() if offer else None
                saves.append((key, text, record.state_json()))
        self._dirty.clear()
        return saves, deletes

    def take_changed(self) -> set[str]:
        """The keys put since the last call (what the engine snapshot must look at again)."""
        changed, self._changed = self._changed, set()
        return changed

    def take_finished(self) -> set[str]:
        """The keys put finished, with Jobs, since the last call and still held (the log
        shipper's: what may have logs to ship now)."""
        finished, self._finished = self._finished, set()
        return finished

    def owned_by(self, owners: Iterable[tuple[str, str]]) -> set[str]:
        """The keys of the workloads whose objects carry these (namespace, name label)s."""
        out: set[str] = set()
        for one in owners:
            out.update(self._by_owner.get(one, ()))
        return out

    def due(self, now: float) -> Iterator[Record]:
        """The records whose wakeup has come, each once (the caller applies `on_timer`)."""
        heap = self._timers
        while heap and heap[0][0] <= now:
            when, key = heapq.heappop(heap)
            record = self.records.get(key)
            if record is not None and wakeup(record, self.cadence) == when:
                yield record  # (else stale: the record changed or went since)

    def admitted_unreported(self) -> list[HeldWorkload]:
        """What a capacity report lists as admitted here, not reported yet."""
        waiting = [self.records[key] for key in sorted(self.unreported)]
        return [
            HeldWorkload(workload=r.key, generation=r.generation, phase=r.phase) for r in waiting
        ]

    def held_summary(self) -> list[HeldWorkload]:
        """What a Hello lists: every held generation and its phase."""
        return [
            HeldWorkload(workload=r.key, generation=r.generation, phase=r.phase)
            for r in sorted(self.records.values(), key=lambda r: r.key)
        ]

    def latest_reports(self) -> list[WorkloadStatusReport]:
        """The last report of every held workload (sent again on every connect)."""
        return [r.last_report for r in self.records.values() if r.last_report is not None]

    def next_wakeup(self) -> float | None:
        return self._timers[0][0] if self._timers else None
