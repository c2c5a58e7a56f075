"""The hub's index of its Slurm-mode workloads: each one's Slurm facts (read once from its
annotations, again only when they change — a release), and who is job N, which tasks make
array N, which jobs share a name and user (singleton). Kept current from the mirror's
events, so the dispatch cycle's holds (hub.placement.holds, which reads it through its
`SlurmJobs` protocol) and the Slurm listing cost lookups, not walks.

One per hub, built at start from the mirror; it lives across leadership terms.
Called by: hub.app (builds it), hub.dispatch (snapshot), hub.slurm (lookups).
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from api.slurm.work import ANNOTATION_PREFIX, SlurmFacts
from api.v1alpha1.workload import Workload
from hub.state import HubState

__all__ = ["SlurmIndex"]

_EMPTY: frozenset[str] = frozenset()


def _slurm_annotations(wl: Workload) -> dict[str, str]:
    return {k: v for k, v in wl.metadata.annotations.items() if k.startswith(ANNOTATION_PREFIX)}


class SlurmIndex:
    def __init__(self, state: HubState) -> None:
        self.state = state
        self._facts: dict[str, SlurmFacts] = {}
        self._read_from: dict[str, dict[str, str]] = {}
        self._by_job: dict[int, str] = {}
        self._arrays: dict[int, set[str]] = {}
        self._named: dict[tuple[str, str], set[str]] = {}
        state.on_indexed.append(self.changed)
        state.on_workload.append(self._notified)
        for key in list(state.workloads):
            self.changed(key)

    # --- SlurmJobs --------------------------------------------------------------------------

    @property
    def facts(self) -> Mapping[str, SlurmFacts]:
        return self._facts

    def key_of_job(self, job_id: int) -> str | None:
        return self._by_job.get(job_id)

    def tasks_of_array(self, array_job_id: int) -> Set[str]:
        return self._arrays.get(array_job_id, _EMPTY)

    def keys_named(self, name: str, user: str) -> Set[str]:
        return self._named.get((name, user), _EMPTY)

    # --- upkeep -----------------------------------------------------------------------------

    def _notified(self, key: str, old: Workload | None, new: Workload | None) -> None:
        # The mirror indexes (`changed`, through on_indexed) every workload it puts or drops
        # before telling its listeners, but for those a relist found gone: only those are
        # news here. Reading every change twice cost each mirror event a second look.
        if new is None:
            self.changed(key)

    def changed(self, key: str) -> None:
        entry = self.state.workloads.get(key)
        if entry is None:
            self._drop(key)
            return
        annotations = entry.workload.metadata.annotations
        if not any(k.startswith(ANNOTATION_PREFIX) for k in annotations):
            self._drop(key)
            return
        ours = _slurm_annotations(entry.workload)
        if self._read_from.get(key) == ours:
            return
        self._drop(key)
        facts = SlurmFacts.from_annotations(ours)
        if facts is None:
            return
        self._read_from[key] = ours
        self._facts[key] = facts
        self._by_job[facts.ids.job_id] = key
        if facts.ids.array_job_id is not None:
            self._arrays.setdefault(facts.ids.array_job_id, set()).add(key)
        self._named.setdefault((facts.name, facts.user), set()).add(key)

    def _drop(self, key: str) -> None:
        facts = self._facts.pop(key, None)
        self._read_from.pop(key, None)
        if facts is None:
            return
        if self._by_job.get(facts.ids.job_id) == key:
            del self._by_job[facts.ids.job_id]
        if facts.ids.array_job_id is not None:
            tasks = self._arrays.get(facts.ids.array_job_id)
            if tasks is not None:
                tasks.discard(key)
                if not tasks:
                    del self._arrays[facts.ids.array_job_id]
        named = self._named.get((facts.name, facts.user))
        if named is not None:
            named.discard(key)
            if not named:
                del self._named[(facts.name, facts.user)]
