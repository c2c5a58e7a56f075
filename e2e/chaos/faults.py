"""The faults of a chaos run, as data: what to break, where, when and for how long — and,
afterwards, how long the federation took to recover from each.

`plan_faults` lists the faults in the steps the driver takes one after another, spread over
clusters: the partitions first (the work they strike runs longest after them), two at a
time on three clusters, then the others one by one.
`aim_at_witnesses` moves a step's partitions onto distinct clusters where a witness runs.
`recovery_seconds` reads the pod histories after the run: the federation has recovered from
a fault when a pod is *created* after the fault ended — in the faulted cluster for a
cluster's fault, anywhere for a hub's — that is, once dispatch reached a cluster again and
an agent materialised new work there. Both are pure.

Called by: e2e.chaos.driver; tests/chaos.
"""

from __future__ import annotations

import bisect
import enum
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from e2e.chaos.invariants import ClusterHistory

__all__ = [
    "CLUSTER_FAULTS",
    "HA_FAULTS",
    "PARTITIONS",
    "FaultKind",
    "FaultRecord",
    "PlannedFault",
    "aim_at_witnesses",
    "plan_faults",
    "recovery_seconds",
]


class FaultKind(enum.StrEnum):
    HUB_KILL = "hub-sigkill"
    """SIGKILL the hub, restart it after `down` seconds."""
    AGENT_KILL = "agent-sigkill"
    """SIGKILL one agent, restart it after `down` seconds."""
    AGENT_STOP = "agent-sigstop"
    """SIGSTOP one agent for `hold` seconds (longer than the loss timeout), then SIGCONT."""
    LINK_CUT = "link-cut"
    """Reset one agent's hub connections and refuse new ones for `hold` seconds."""
    LINK_BLACKHOLE = "link-blackhole"
    """Forward no byte between one agent and the hub for `hold` seconds."""
    KUBESIM_ERRORS = "kubesim-errors"
    """Answer a cluster's next API requests with 429, 500 or 504."""
    KUBESIM_PAUSE = "kubesim-pause"
    """Stop answering a cluster's API requests for `hold` seconds."""
    KUBESIM_DROP_WATCHES = "kubesim-drop-watches"
    """Close every watch stream of a cluster (and forget its watch history: 410 on resume)."""
    ETCD_KILL = "etcd-sigkill"
    """HA only: SIGKILL etcd, restart it after `down` seconds."""
    LEADER_KILL = "leader-sigkill"
    """HA only: SIGKILL the leading hub while a standby runs; restart it after `down`."""


CLUSTER_FAULTS = frozenset(
    {
        FaultKind.AGENT_KILL,
        FaultKind.AGENT_STOP,
        FaultKind.LINK_CUT,
        FaultKind.LINK_BLACKHOLE,
        FaultKind.KUBESIM_ERRORS,
        FaultKind.KUBESIM_PAUSE,
        FaultKind.KUBESIM_DROP_WATCHES,
    }
)
"""Faults of one member cluster (`target` names it); the others hit the hub side."""
HA_FAULTS = frozenset({FaultKind.ETCD_KILL, FaultKind.LEADER_KILL})
PARTITIONS = frozenset({FaultKind.AGENT_STOP, FaultKind.LINK_CUT, FaultKind.LINK_BLACKHOLE})
"""Faults that cut one cluster off from the hub for longer than the loss timeout: the hub
may then start the cluster's work elsewhere, the case fencing exists for."""


@dataclass(frozen=True)
class PlannedFault:
    kind: FaultKind
    target: str | None
    """The cluster of a cluster's fault; None for the hub's."""
    hold: float
    """Seconds the fault lasts (down time for a kill)."""


@dataclass(frozen=True)
class FaultRecord:
    """A fault as it happened: seconds since the epoch."""

    kind: FaultKind
    target: str | None
    started_at: float
    ended_at: float
    detail: str = ""
    recovered_after: float | None = None
    """Seconds from `ended_at` until the federation dispatched again (None: it did not)."""

    def to_json(self, origin: float) -> dict[str, object]:
        return {
            "kind": str(self.kind),
            "target": self.target,
            "at": round(self.started_at - origin, 1),
            "seconds": round(self.ended_at - self.started_at, 1),
            "recoveredAfter": None
            if self.recovered_after is None
            else round(self.recovered_after, 2),
            **({"detail": self.detail} if self.detail else {}),
        }


def plan_faults(
    counts: Mapping[FaultKind, int],
    clusters: Sequence[str],
    holds: Mapping[FaultKind, float],
    rng: random.Random,
) -> list[tuple[PlannedFault, ...]]:
    """`counts[kind]` faults of each kind, each lasting `holds[kind]`, cluster faults spread
    over `clusters` in turn, as steps the driver takes one after another: first the
    partitions, in a shuffled order, as many at once as leaves one cluster whole (the hub
    needs somewhere to start what it lets go of), the longest together; then every other
    fault alone, shuffled."""
    faults: list[PlannedFault] = []
    turn = 0
    for kind in FaultKind:
        for _ in range(counts.get(kind, 0)):
            target = None
            if kind in CLUSTER_FAULTS:
                target = clusters[turn % len(clusters)]
                turn += 1
            faults.append(PlannedFault(kind, target, holds.get(kind, 0.0)))
    rng.shuffle(faults)
    partitions = sorted((f for f in faults if f.kind in PARTITIONS), key=lambda f: -f.hold)
    at_once = max(1, len(clusters) - 1)
    steps = [tuple(partitions[i : i + at_once]) for i in range(0, len(partitions), at_once)]
    rng.shuffle(steps)
    return steps + [(f,) for f in faults if f.kind not in PARTITIONS]


def aim_at_witnesses(
    step: Sequence[PlannedFault], running: Mapping[str, str], clusters: Sequence[str]
) -> tuple[list[PlannedFault], list[str]]:
    """The step's faults aimed at distinct clusters, each with a note: first at clusters
    where a witness runs (`running`: cluster -> witness; a fault's own target if it can),
    then, when witnesses run out, at their planned cluster or another not struck yet — never
    two faults of a step on one cluster, which would partition fewer clusters than planned
    (and heal one fault's link when the other's ends)."""
    free = sorted(running)
    struck: set[str] = set()
    aimed: list[PlannedFault] = []
    notes: list[str] = []
    for fault in step:
        witnessed = bool(free)
        choices = free if witnessed else [c for c in clusters if c not in struck]
        target = next((c for c in choices if c == fault.target), choices[0] if choices else None)
        if target is None:  # more faults than clusters: it strikes where it was planned
            aimed.append(fault)
            notes.append("no witness ran there before the fault")
            continue
        if witnessed:
            free.remove(target)
        struck.add(target)
        aimed.append(replace(fault, target=target))
        notes.append(
            f"witness {running[target]} ran there"
            if witnessed
            else "no witness ran there before the fault"
        )
    return aimed, notes


def recovery_seconds(
    faults: Iterable[FaultRecord], histories: Sequence[ClusterHistory]
) -> list[FaultRecord]:
    """Each fault with `recovered_after`: from its end to the first pod created after it in
    its cluster (any cluster for a hub's fault)."""
    created: dict[str, list[float]] = {
        h.cluster: sorted(run.created_at for run in h.runs if run.workload) for h in histories
    }
    everywhere = sorted(t for times in created.values() for t in times)
    measured = []
    for fault in faults:
        times = created.get(fault.target, []) if fault.target else everywhere
        i = bisect.bisect_left(times, fault.ended_at)
        after = times[i] if i < len(times) else None
        measured.append(
            replace(fault, recovered_after=None if after is None else after - fault.ended_at)
        )
    return measured
