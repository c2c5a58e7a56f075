"""Between the api models the agent holds and the engine's frozen types: the snapshot each
admission cycle reads, built incrementally, and the engine's admissions turned back into the
api form the agent reports and persists.

The cycle runs on every event, so `SnapshotCache.build` must not re-convert everything, nor
even look at everything: the configuration is converted once per ConfigSync (with
`agent.engine.from_api`), each workload once per change of its workload object (records are
immutable: a transition that changes the status makes a new workload), finished workloads
are left out (they hold no quota), and the shell names the workloads it changed since the
last build, so a build costs what changed plus one dict copy. A reservation holds its quota
like an admitted workload: its status carries the admission.

The cycle is incremental too (`agent.engine.cycle.schedule_incremental`): the cache keeps the
engine's `Carry` and the ids of the engine workloads it replaced since the last cycle, and
`cycle` hands both to the engine, so a cycle over a deep queue costs what changed.

Called by: agent.admission (every cycle, and on admission); agent.capacity reads the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from agent.engine.carry import Carry
from agent.engine.cycle import schedule_incremental
from agent.engine.from_api import build_snapshot, workload_from_api
from agent.engine.result import CycleResult
from agent.engine.snapshot import Admission as EngineAdmission
from agent.engine.snapshot import Snapshot, WorkloadId
from agent.engine.snapshot import Workload as EngineWorkload
from agent.records import Record
from api.quantity import Quantity
from api.v1alpha1.messages import ConfigSync
from api.v1alpha1.workload import Admission, PodSetAssignment, Workload, WorkloadStatus

__all__ = ["SnapshotCache", "api_admission", "namespace_labels"]


def api_admission(adm: EngineAdmission) -> Admission:
    """The engine's admission in the api form (what reports and the state carry)."""
    return Admission(
        cluster_queue=adm.cluster_queue,
        pod_set_assignments=[
            PodSetAssignment(
                name=ps.name,
                flavors={str(r): str(f) for r, f in ps.flavors.items()},
                resource_usage={r: Quantity.from_milli(v) for r, v in ps.usage.items()},
                count=ps.count,
            )
            for ps in adm.pod_sets
        ],
    )


@dataclasses.dataclass(slots=True)
class _Converted:
    workload: Workload
    status: WorkloadStatus | None
    sticky: bool
    engine: EngineWorkload


def namespace_labels(
    cluster: Mapping[str, Mapping[str, str]], config: ConfigSync
) -> dict[str, dict[str, str]]:
    """The labels namespaceSelectors are matched against: each namespace's labels in the
    cluster, with the ones the hub asserts (its tenant) over them — for a namespace not
    created here yet too, since the agent creates it with them when its first Job comes."""
    out = {name: dict(labels) for name, labels in cluster.items()}
    for pushed in config.namespaces:
        out.setdefault(pushed.name, {}).update(pushed.labels)
    return out


class SnapshotCache:
    """The engine's view of the held workloads, kept between cycles: only the workloads the
    shell names as changed are looked at again (a full walk when it cannot name them)."""

    def __init__(self) -> None:
        self._base: Snapshot | None = None
        self._config: ConfigSync | None = None
        self._namespaces: Mapping[str, Mapping[str, str]] | None = None
        self._priorities: dict[str, int] = {}
        self._workloads: dict[str, _Converted] = {}
        self._engine: dict[WorkloadId, EngineWorkload] = {}
        """What the last snapshot held: the converted unfinished workloads, by engine id."""
        self._carry: Carry | None = None
        self._replaced: set[WorkloadId] | None = None
        """Engine ids added, replaced or dropped since the last `cycle` (None: unknown)."""

    def build(
        self,
        config: ConfigSync | None,
        held: Mapping[str, Record],
        changed: Iterable[str] | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Snapshot:
        """The snapshot of `config`, the cluster's namespaces' labels (by name; a new object
        when they change) and the unfinished workloads of `held`. `changed`: the keys whose
        record may differ since the last build — forgotten ones included — (None: any of
        them)."""
        cfg = config or ConfigSync(revision=0)
        new_config = self._config is not cfg
        if self._base is None or new_config or self._namespaces is not namespaces:
            self._base = build_snapshot(
                flavors=cfg.resource_flavors,
                cluster_queues=cfg.cluster_queues,
                local_queues=cfg.local_queues,
                cohorts=cfg.cohorts,
                workloads=(),
                namespaces=namespace_labels(namespaces or {}, cfg),
            )
            self._namespaces = namespaces
        if new_config:
            self._config = cfg
            self._priorities = {p.metadata.name: p.value for p in cfg.workload_priority_classes}
            self._workloads.clear()
            changed = None
        if changed is None:
            self._engine = {}
            self._replaced = None
            keys: Iterable[str] = held
        else:
            keys = changed
        for key in keys:
            self._refresh(key, held.get(key))
        return dataclasses.replace(self._base, workloads=dict(self._engine))

    def cycle(self, snapshot: Snapshot) -> Callable[[float], CycleResult]:
        """The admission cycle over `snapshot` (the last `build`), to call with `now` — in a
        worker thread if need be: what changed is taken here, and the carry is only read and
        replaced by the cycles, which run one at a time."""
        replaced, self._replaced = self._replaced, set()
        carry, self._carry = self._carry, None  # (a cycle that raises leaves none behind)

        def run(now: float) -> CycleResult:
            result, self._carry = schedule_incremental(snapshot, now, carry, replaced)
            return result

        return run

    def _refresh(self, key: str, item: Record | None) -> None:
        cached = self._workloads.get(key)
        replaced = self._replaced
        if replaced is not None:
            replaced.add(WorkloadId(key))
            if cached is not None:
                replaced.add(cached.engine.id)
        if item is None or item.settled:
            if cached is not None:
                self._engine.pop(cached.engine.id, None)
                if item is None:
                    del self._workloads[key]
            return
        wl = item.workload
        sticky = item.preempting
        if (
            cached is None
            or cached.workload is not wl
            or cached.status is not wl.status
            or cached.sticky != sticky
        ):
            if cached is not None:
                self._engine.pop(cached.engine.id, None)
            engine = workload_from_api(
                wl,
                priorities=self._priorities,
                preempting=sticky,
                arrived_at=item.offered_at or None,
            )
            cached = _Converted(wl, wl.status, sticky, engine)
            self._workloads[key] = cached
            if replaced is not None:
                replaced.add(engine.id)
        self._engine[cached.engine.id] = cached.engine
