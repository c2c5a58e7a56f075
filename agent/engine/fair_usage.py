"""Admission fair sharing (kueue.md §3.3): each local queue's consumed resources, decayed by a
half-life, and the score that orders the waiting workloads of a cluster queue with
`admissionScope.admissionMode: UsageBasedAdmissionFairSharing`.

Owns the arithmetic, pure (no clock: `now` is an argument):

- `LocalQueueUsage`: what is kept per local queue (durably, by the agent) — the decayed
  consumed resources, the entry penalties not yet settled, and when it was last sampled;
- `sample`: one sampling step for every local queue that is due (`usageSamplingInterval`
  since its last update): `consumed ← consumed·(1−α) + admitted·α` with
  `α = 1 − 0.5^(Δt / usageHalfLifeTime)`, penalties settled (the admitted usage now holds
  them);
- `penalize`: the entry penalty of an admission, `requests·α(usageSamplingInterval)`, added
  at once so the next cycle already sees the queue as heavier;
- `usage_score`: `Σ_r weight_r·(consumed_r + penalty_r) / localQueue.weight` in units (weight
  ≤ 0: +∞), and `scores`/`stamp`, which put it in the queue order (`Workload.queue_usage`).

The score is read once per cycle from the snapshot: the workloads one cycle admits from one
local queue add their penalties for the next cycle, not for the rest of that cycle.

Called by: agent.fair_usage (the agent's book of usage), agent.snapshots (stamping),
bench.engine_admission_fair_sharing and the tests.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.engine.snapshot import (
    AdmissionFairSharing,
    LocalQueueKey,
    ResourceName,
    Snapshot,
    Workload,
)

__all__ = [
    "LocalQueueUsage",
    "admitted_usage",
    "alpha",
    "penalize",
    "requests",
    "sample",
    "scores",
    "stamp",
    "usage_score",
    "with_usage",
]


@dataclass(frozen=True, slots=True)
class LocalQueueUsage:
    """One local queue's usage, in milli-units per resource."""

    consumed: Mapping[ResourceName, float] = field(default_factory=dict)
    penalty: Mapping[ResourceName, float] = field(default_factory=dict)
    """Entry penalties of admissions since the last sample."""
    last_update: float = 0.0


def alpha(elapsed: float, half_life: float) -> float:
    """The weight of the present in a sample `elapsed` seconds after the last one: 0 with no
    half-life (usage is then kept at zero, as Kueue does)."""
    if half_life <= 0:
        return 0.0
    return 1.0 - math.pow(0.5, max(elapsed, 0.0) / half_life)


def requests(wl: Workload) -> dict[ResourceName, int]:
    """The workload's total requests per resource (every pod of every pod set)."""
    out: dict[ResourceName, int] = {}
    for ps in wl.pod_sets:
        for res, amount in ps.requests.items():
            out[res] = out.get(res, 0) + amount * ps.count
    return out


def admitted_usage(workloads: Iterable[Workload]) -> dict[LocalQueueKey, dict[ResourceName, int]]:
    """What each local queue's admitted workloads hold now, per resource (any flavor)."""
    out: dict[LocalQueueKey, dict[ResourceName, int]] = {}
    for wl in workloads:
        adm = wl.admission
        if adm is None:
            continue
        total = out.setdefault(wl.local_queue, {})
        for (_, res), amount in adm.total.items():
            total[res] = total.get(res, 0) + amount
    return out


def sample(
    usage: Mapping[LocalQueueKey, LocalQueueUsage],
    local_queues: Iterable[LocalQueueKey],
    admitted: Mapping[LocalQueueKey, Mapping[ResourceName, int]],
    now: float,
    config: AdmissionFairSharing,
) -> dict[LocalQueueKey, LocalQueueUsage]:
    """The usage of `local_queues` at `now`: a queue seen for the first time starts at zero
    from `now`; one whose last update is at least a sampling interval old takes one sample
    of its `admitted` usage; the others are kept as they are. Queues not named are dropped."""
    out: dict[LocalQueueKey, LocalQueueUsage] = {}
    half_life = config.usage_half_life_seconds
    for key in local_queues:
        before = usage.get(key)
        if before is None:
            out[key] = LocalQueueUsage(last_update=now)
            continue
        elapsed = now - before.last_update
        if elapsed < config.usage_sampling_interval_seconds:
            out[key] = before
            continue
        if half_life <= 0:
            out[key] = LocalQueueUsage(last_update=now)
            continue
        a = alpha(elapsed, half_life)
        held = admitted.get(key, {})
        consumed: dict[ResourceName, float] = {}
        for res in before.consumed.keys() | held.keys():
            value = before.consumed.get(res, 0.0) * (1.0 - a) + held.get(res, 0) * a
            if value > 0.0:
                consumed[res] = value
        out[key] = LocalQueueUsage(consumed, {}, now)
    return out


def penalize(
    usage: LocalQueueUsage, asked: Mapping[ResourceName, int], config: AdmissionFairSharing
) -> LocalQueueUsage:
    """`usage` with the entry penalty of an admission asking `asked` added."""
    a = alpha(config.usage_sampling_interval_seconds, config.usage_half_life_seconds)
    if a == 0.0:
        return usage
    penalty = dict(usage.penalty)
    for res, amount in asked.items():
        penalty[res] = penalty.get(res, 0.0) + amount * a
    return dataclasses.replace(usage, penalty=penalty)


def usage_score(usage: LocalQueueUsage, config: AdmissionFairSharing, weight: float) -> float:
    """The local queue's place in its cluster queue's order: lower goes first."""
    if weight <= 0:
        return math.inf
    weights = config.resource_weights
    total = 0.0
    for part in (usage.consumed, usage.penalty):
        for res, amount in part.items():
            total += weights.get(res, 1.0) * amount
    return total / 1000.0 / weight


def scores(
    snapshot: Snapshot, usage: Mapping[LocalQueueKey, LocalQueueUsage]
) -> dict[LocalQueueKey, float]:
    """The usage score of every local queue whose cluster queue orders by admission fair
    sharing (none when the snapshot's configuration has no `admission_fair_sharing`)."""
    config = snapshot.config.admission_fair_sharing
    if config is None:
        return {}
    out: dict[LocalQueueKey, float] = {}
    empty = LocalQueueUsage()
    for key, lq in snapshot.local_queues.items():
        cq = snapshot.cluster_queues.get(lq.cluster_queue)
        if cq is not None and cq.admission_fair_sharing:
            out[key] = usage_score(usage.get(key, empty), config, lq.fair_sharing_weight)
    return out


def stamp(wl: Workload, by_queue: Mapping[LocalQueueKey, float]) -> Workload:
    """`wl` with its local queue's score in its queue order (0 when admitted or when its
    queue has none); the same object when that is what it carries already."""
    score = by_queue.get(wl.local_queue, 0.0) if wl.admission is None else 0.0
    if score == wl.queue_usage:
        return wl
    return dataclasses.replace(wl, queue_usage=score)


def with_usage(snapshot: Snapshot, usage: Mapping[LocalQueueKey, LocalQueueUsage]) -> Snapshot:
    """`snapshot` with every waiting workload stamped with its local queue's score (a walk
    over every workload: the agent stamps incrementally instead, `agent.snapshots`)."""
    by_queue = scores(snapshot, usage)
    workloads = {wid: stamp(wl, by_queue) for wid, wl in snapshot.workloads.items()}
    return dataclasses.replace(snapshot, workloads=workloads, queue_usage=by_queue)
