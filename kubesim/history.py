"""Pod history: when every pod of a cluster ran, kept after the pod is gone.

A real cluster forgets a pod once it is deleted; a test that asks "did two copies of this
workload run at the same time in two clusters?" needs the pods that are gone too. `PodHistory`
subscribes to the cluster's store (so it sees every pod write, whoever made it) and keeps one
`PodRun` per pod: its identity and labels, its node, when it was created, when it started
running (the first write that shows phase Running) and when it stopped running (the first
write with a terminal phase, or its deletion), and how it ended.

Times are wall-clock seconds since the epoch, read from the clock given (time.time by
default): the chaos checker compares runs across clusters and processes on one machine.
Runs are kept in creation order up to a bound (`ClusterConfig.pod_history_limit`); older
ones are dropped first and counted in `dropped`, so a reader knows when the history is not
whole.

Called by: kubesim.cluster (subscribes it, exposes `Cluster.history`), kubesim.admin
(`GET /_kubesim/history/pods`), the chaos suite (e2e/chaos) through that endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.store import EventType, StoreEvent

__all__ = ["DEFAULT_LIMIT", "PodHistory", "PodRun"]

DEFAULT_LIMIT = 50_000
"""Runs kept per cluster: a chaos run makes a few thousand pods, and a scale run of 10,000
pods keeps every one for a few MiB; past this the oldest are dropped (and counted)."""

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DELETED = "Deleted"
"""The outcome of a pod deleted before it reached a terminal phase."""


@dataclass(slots=True)
class PodRun:
    """One pod's life in one cluster, as the chaos checker reads it."""

    cluster: str
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    created_at: float
    node: str | None = None
    started_at: float | None = None
    """When a write first showed the pod Running (None: it never ran)."""
    stopped_at: float | None = None
    """When the pod first reached Succeeded or Failed, or was deleted (None: still alive)."""
    outcome: str | None = None
    """Succeeded, Failed or Deleted (None: still alive)."""
    reason: str | None = None
    """The pod's status.reason when it ended, if any (DeadlineExceeded, NodeLost, …)."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "labels": dict(self.labels),
            "node": self.node,
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "stoppedAt": self.stopped_at,
            "outcome": self.outcome,
            "reason": self.reason,
        }


@dataclass(eq=False)
class PodHistory:
    """Every pod of one cluster, by uid, in creation order; fed by store events."""

    cluster: str
    clock: Callable[[], float] = time.time
    limit: int = DEFAULT_LIMIT
    dropped: int = 0
    _runs: dict[str, PodRun] = field(default_factory=dict)

    def observe(self, event: StoreEvent) -> None:
        """A store subscriber: runs inside the write, so it only records."""
        pod = event.obj
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        run = self._runs.get(uid)
        now = self.clock()
        if run is None:
            if event.type is EventType.DELETED:
                return  # created before the history started (or already dropped)
            run = self._runs[uid] = PodRun(
                cluster=self.cluster,
                namespace=meta.get("namespace", ""),
                name=meta["name"],
                uid=uid,
                labels=dict(meta.get("labels") or {}),
                created_at=now,
            )
            self._trim()
        if run.outcome is not None:
            return
        run.node = (pod.get("spec") or {}).get("nodeName") or run.node
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase == "Running" and run.started_at is None:
            run.started_at = now
        if phase in TERMINAL_PHASES:
            run.stopped_at, run.outcome, run.reason = now, phase, status.get("reason")
        elif event.type is EventType.DELETED:
            run.stopped_at, run.outcome = now, DELETED

    def _trim(self) -> None:
        while len(self._runs) > self.limit:
            del self._runs[next(iter(self._runs))]
            self.dropped += 1

    def runs(self) -> list[PodRun]:
        """Every run kept, oldest first."""
        return list(self._runs.values())

    def to_wire(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "dropped": self.dropped,
            "pods": [run.to_wire() for run in self._runs.values()],
        }
