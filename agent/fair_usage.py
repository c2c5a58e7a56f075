"""The agent's book of admission fair sharing usage: each local queue's decayed consumed
resources (the arithmetic is `agent.engine.fair_usage`, pure), sampled before a cycle when a
sampling interval has passed, penalised by each cycle's admissions, and kept durably so an
agent restart does not forget who used the cluster (`fair_usage.json` in the state
directory, written whole and atomically by `agent.state` whenever it changed).

Only local queues of cluster queues with `admissionScope.admissionMode:
UsageBasedAdmissionFairSharing` are tracked, and only while admission fair sharing is
configured (the hub's MemberCluster.spec.admissionFairSharing, or the agent's
--admission-fair-sharing-half-life). Times are the agent's wall clock (seconds since the
epoch), so usage decays across a restart as if the agent had kept sampling.

Called by: agent.snapshots (`SnapshotCache` samples and stamps each cycle's snapshot),
agent.admission (penalties after each cycle, loading at start), agent.capacity (the usage
reported to the hub for LocalQueue status).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from agent.engine.fair_usage import (
    LocalQueueUsage,
    admitted_usage,
    penalize,
    requests,
    sample,
    scores,
)
from agent.engine.result import CycleResult
from agent.engine.snapshot import LocalQueueKey, ResourceName, Snapshot
from api.quantity import Quantity, resource_amount
from api.v1alpha1.messages import LocalQueueUsage as ReportedUsage

__all__ = ["UsageBook"]

log = logging.getLogger(__name__)

_VERSION = 1


class UsageBook:
    """Every tracked local queue's usage; see the module docstring. `save` is called with
    the book's JSON after a change (None: not kept)."""

    def __init__(self, save: Callable[[str], None] | None = None) -> None:
        self.usage: dict[LocalQueueKey, LocalQueueUsage] = {}
        self._save = save
        self._dirty = False
        self._interval: float | None = None
        """The sampling interval while admission fair sharing is on (None: off)."""
        self._holding = False
        """A tracked queue had admitted work at the last sample, or admitted some since."""

    # durability ----------------------------------------------------------------------------

    def load(self, text: str | None) -> None:
        """Restore the book from `text` (what `save` was given); unreadable: start empty."""
        if not text:
            return
        try:
            raw = json.loads(text)
            if raw.get("version") != _VERSION:
                raise ValueError(f"unknown version {raw.get('version')!r}")
            self.usage = {
                LocalQueueKey(key): LocalQueueUsage(
                    _amounts(entry.get("consumed", {})),
                    _amounts(entry.get("penalty", {})),
                    float(entry["lastUpdate"]),
                )
                for key, entry in raw["localQueues"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("ignoring unreadable admission fair sharing usage: %s", exc)
            self.usage = {}

    def dump(self) -> str:
        return json.dumps(
            {
                "version": _VERSION,
                "localQueues": {
                    key: {
                        "consumed": dict(u.consumed),
                        "penalty": dict(u.penalty),
                        "lastUpdate": u.last_update,
                    }
                    for key, u in sorted(self.usage.items())
                },
            },
            sort_keys=True,
        )

    def flush(self) -> None:
        """Hand the book to `save` if it changed since the last flush."""
        if self._dirty and self._save is not None:
            self._save(self.dump())
        self._dirty = False

    # the cycle -----------------------------------------------------------------------------

    def advance(self, snapshot: Snapshot, now: float) -> None:
        """Sample the tracked queues that are due at `now` (and start or drop queues that
        appeared or went); nothing when admission fair sharing is off."""
        config = snapshot.config.admission_fair_sharing
        self._interval = None if config is None else config.usage_sampling_interval_seconds
        if config is None:
            return
        tracked = _tracked(snapshot)
        interval = config.usage_sampling_interval_seconds
        due = tracked != self.usage.keys() or any(
            now - u.last_update >= interval for u in self.usage.values()
        )
        if not due:
            return
        running = (w for w in snapshot.workloads.values() if w.admission is not None)
        held = admitted_usage(running)
        self._holding = any(key in tracked for key in held)
        updated = sample(self.usage, tracked, held, now, config)
        if updated != self.usage:
            self.usage = updated
            self._dirty = True

    def admitted(self, snapshot: Snapshot, result: CycleResult) -> None:
        """Add the entry penalty of every admission of `result` (a cycle over `snapshot`)."""
        config = snapshot.config.admission_fair_sharing
        if config is None:
            return
        for admit in result.admitted:
            wl = snapshot.workloads.get(admit.workload)
            if wl is None or wl.local_queue not in self.usage:
                continue
            self.usage[wl.local_queue] = penalize(self.usage[wl.local_queue], requests(wl), config)
            self._dirty = True
            self._holding = True

    def next_sample_at(self) -> float | None:
        """When the next sample is due, if it can change anything: while a queue has usage to
        decay or admitted work to count. The agent runs a cycle then, so usage moves with
        time as Kueue's periodic sampling does, not only with events."""
        if self._interval is None or not self.usage:
            return None
        idle = not any(u.consumed or u.penalty for u in self.usage.values())
        if idle and not self._holding:
            return None
        return min(u.last_update for u in self.usage.values()) + self._interval

    def scores(self, snapshot: Snapshot) -> dict[LocalQueueKey, float]:
        return scores(snapshot, self.usage)

    def report(self) -> list[ReportedUsage]:
        """The tracked queues' consumed resources for the hub (penalties included: they are
        part of what orders the queue until the next sample)."""
        out = []
        for key, u in sorted(self.usage.items()):
            namespace, _, name = key.partition("/")
            total: dict[ResourceName, float] = dict(u.consumed)
            for res, amount in u.penalty.items():
                total[res] = total.get(res, 0.0) + amount
            out.append(
                ReportedUsage(
                    namespace=namespace,
                    name=name,
                    consumed_resources={
                        res: _quantity(res, amount) for res, amount in sorted(total.items())
                    },
                    last_update=datetime.fromtimestamp(u.last_update, UTC),
                )
            )
        return out


def _tracked(snapshot: Snapshot) -> set[LocalQueueKey]:
    if snapshot.config.admission_fair_sharing is None:
        return set()
    cqs = snapshot.cluster_queues
    return {
        key
        for key, lq in snapshot.local_queues.items()
        if (cq := cqs.get(lq.cluster_queue)) is not None and cq.admission_fair_sharing
    }


def _amounts(raw: Mapping[str, Any]) -> dict[ResourceName, float]:
    return {ResourceName(str(k)): float(v) for k, v in raw.items()}


def _quantity(resource: str, milli: float) -> Quantity:
    return resource_amount(resource, round(milli))
