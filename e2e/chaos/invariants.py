"""The invariant checker of the chaos suite: what MultiQ promises, counted after a run.

Pure: it reads data and returns a `Verdict` — no I/O, no clock. Its inputs are every cluster's
pod history (`GET /_kubesim/history/pods`, see kubesim.history), the hub's final view of every
workload (from its REST API), the workloads the hub accepted (answered 201), and when the run
ended. It reports, per invariant of shared/design/ARCHITECTURE.md:

- **overlapping**: two pods of one workload ran at overlapping times in different clusters —
  counted per workload, and separately when both pods belong to one dispatch generation (a
  partition re-dispatch raises the generation, an AllAtOnce double run does not);
- **lost**: accepted by the hub but absent from its view at the end;
- **terminal**: not exactly one terminal state — the hub shows more than one Finished
  condition, or the driver saw the workload's terminal state change once it had one
  (Succeeded then Failed, or finished then pending again), or the hub says Succeeded while
  no pod of it succeeded in any cluster;
- **stuck**: accepted and not finished (no Finished=True) at the end.

Also counted, but not a violation: workloads whose pods completed in more than one run (a run
is a cluster and a generation; it completed when a pod of it Succeeded). The protocol allows
it — a cluster cut off while its pods finish cannot report success, so the hub runs the
workload again elsewhere once the loss rules let it — but it shows how much work faults cost.

A history that dropped runs (`dropped > 0`) makes the verdict fail too: the checker cannot
vouch for what it did not see.

Pods are tied to workloads by the labels the agent puts on everything it creates
(`multiq.dev/workload-namespace`, `multiq.dev/workload-name`,
`multiq.dev/dispatch-generation`); a workload name longer than a label value (63) is
shortened by the agent and would not match, so chaos workloads have short names.

Called by: e2e.chaos.driver (after a run), tests/chaos (synthetic histories).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

__all__ = [
    "ClusterHistory",
    "HubWorkload",
    "Observation",
    "Overlap",
    "PodRun",
    "Stuck",
    "TerminalViolation",
    "Verdict",
    "check",
]

NAMESPACE_LABEL = "multiq.dev/workload-namespace"
NAME_LABEL = "multiq.dev/workload-name"
GENERATION_LABEL = "multiq.dev/dispatch-generation"
FINISHED = "Finished"
SUCCEEDED = "Succeeded"


# --- inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodRun:
    """One pod's run in one cluster (the wire form of kubesim.history.PodRun)."""

    cluster: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    created_at: float
    started_at: float | None = None
    stopped_at: float | None = None
    outcome: str | None = None
    node: str | None = None
    reason: str | None = None

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> PodRun:
        return cls(
            cluster=str(body["cluster"]),
            namespace=str(body["namespace"]),
            name=str(body["name"]),
            labels=dict(body.get("labels") or {}),
            created_at=float(body["createdAt"]),
            started_at=_float_or_none(body.get("startedAt")),
            stopped_at=_float_or_none(body.get("stoppedAt")),
            outcome=body.get("outcome"),
            node=body.get("node"),
            reason=body.get("reason"),
        )

    @property
    def workload(self) -> str | None:
        """`namespace/name` of the MultiQ workload this pod belongs to, if any."""
        name = self.labels.get(NAME_LABEL)
        if not name:
            return None
        return f"{self.labels.get(NAMESPACE_LABEL) or self.namespace}/{name}"

    @property
    def generation(self) -> int | None:
        try:
            return int(self.labels[GENERATION_LABEL])
        except (KeyError, ValueError):
            return None

    def interval(self, ended_at: float) -> tuple[float, float] | None:
        """When it ran; a pod still running at the end counts as running until the end."""
        if self.started_at is None:
            return None
        return self.started_at, self.stopped_at if self.stopped_at is not None else ended_at


@dataclass(frozen=True)
class ClusterHistory:
    cluster: str
    runs: Sequence[PodRun]
    dropped: int = 0

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> ClusterHistory:
        return cls(
            cluster=str(body["cluster"]),
            runs=[PodRun.from_wire(pod) for pod in body.get("pods") or []],
            dropped=int(body.get("dropped") or 0),
        )


@dataclass(frozen=True)
class HubWorkload:
    """What the hub shows of one workload at the end."""

    key: str
    finished_reasons: tuple[str, ...] = ()
    """The reason of every Finished=True condition (more than one is itself a violation)."""
    cluster: str | None = None
    generation: int | None = None

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> HubWorkload:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        reasons = tuple(
            str(c.get("reason") or "")
            for c in status.get("conditions") or []
            if c.get("type") == FINISHED and c.get("status") == "True"
        )
        return cls(
            key=f"{meta.get('namespace') or 'default'}/{meta['name']}",
            finished_reasons=reasons,
            cluster=status.get("clusterName"),
            generation=status.get("dispatchGeneration"),
        )

    @property
    def finished(self) -> bool:
        return bool(self.finished_reasons)


@dataclass(frozen=True)
class Observation:
    """The terminal state (Finished reason, None while unfinished) the driver saw a workload
    in, from `at` on: the driver records one each time it changes."""

    at: float
    reason: str | None


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


# --- findings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Overlap:
    """Two pods of one workload that ran at the same time in two clusters."""

    workload: str
    first: PodRun
    second: PodRun
    seconds: float
    """How long they ran together."""

    @property
    def same_generation(self) -> bool:
        return self.first.generation == self.second.generation

    def describe(self, origin: float) -> str:
        return (
            f"{self.workload}: {_run_text(self.first, origin)} and "
            f"{_run_text(self.second, origin)} ran together for {_seconds(self.seconds)}"
        )


@dataclass(frozen=True)
class TerminalViolation:
    workload: str
    detail: str

    def describe(self, origin: float) -> str:
        return f"{self.workload}: {self.detail}"


@dataclass(frozen=True)
class Stuck:
    workload: str
    cluster: str | None
    generation: int | None

    def describe(self, origin: float) -> str:
        where = (
            f"bound to {self.cluster} (generation {self.generation})"
            if self.cluster
            else ("not bound to any cluster")
        )
        return f"{self.workload}: not finished at the end, {where}"


def _seconds(value: float) -> str:
    """Milliseconds matter for a copy killed right after it started: it did start."""
    return f"{value:.2f}s" if value >= 0.1 else f"{value:.3f}s"


def _run_text(run: PodRun, origin: float) -> str:
    start, stop = run.interval(float("inf")) or (0.0, 0.0)
    until = "the end" if stop == float("inf") else f"{stop - origin:.2f}s"
    return (
        f"pod {run.namespace}/{run.name} in {run.cluster} (generation {run.generation}) "
        f"from {start - origin:.2f}s to {until}"
    )


@dataclass(frozen=True)
class Verdict:
    accepted: int
    finished: int
    overlapping: tuple[Overlap, ...] = ()
    """One per workload that ran in two clusters at once (its longest overlap), longest
    first."""
    overlapping_generations: tuple[Overlap, ...] = ()
    """One per workload whose same generation ran in two clusters at once, longest first."""
    lost: tuple[str, ...] = ()
    terminal: tuple[TerminalViolation, ...] = ()
    stuck: tuple[Stuck, ...] = ()
    completed_more_than_once: tuple[str, ...] = ()
    """Workloads whose pods completed in more than one run (allowed; counted for the cost)."""
    incomplete_histories: tuple[str, ...] = ()
    """Clusters whose history dropped runs: what they ran cannot be checked."""
    origin: float = 0.0
    """Times in `explain` are seconds after this (the run's start)."""

    @property
    def ok(self) -> bool:
        return not (
            self.overlapping
            or self.overlapping_generations
            or self.lost
            or self.terminal
            or self.stuck
            or self.incomplete_histories
        )

    def counts(self) -> dict[str, int]:
        return {
            "accepted": self.accepted,
            "finished": self.finished,
            "lost": len(self.lost),
            "overlapping": len(self.overlapping),
            "overlapping_same_generation": len(self.overlapping_generations),
            "not_exactly_one_terminal_state": len(self.terminal),
            "stuck": len(self.stuck),
            "completed_more_than_once": len(self.completed_more_than_once),
        }

    def explain(self, *, limit: int = 10) -> str:
        """Every broken invariant with up to `limit` examples: which workloads, which
        clusters, when (seconds after the run started)."""
        if self.ok:
            return "every invariant holds"
        sections: list[tuple[str, Sequence[Any]]] = [
            ("ran in two clusters at once (overlapping)", self.overlapping),
            (
                "one generation ran in two clusters at once (overlapping, same generation)",
                self.overlapping_generations,
            ),
            ("accepted by the hub, then lost", self.lost),
            ("not exactly one terminal state", self.terminal),
            ("accepted and not finished by the end (stuck)", self.stuck),
        ]
        lines: list[str] = []
        if self.incomplete_histories:
            lines.append(
                "pod history incomplete (runs dropped) in: " + ", ".join(self.incomplete_histories)
            )
        for title, items in sections:
            if not items:
                continue
            lines.append(f"{len(items)} workload(s) {title}:")
            for item in items[:limit]:
                text = item if isinstance(item, str) else item.describe(self.origin)
                lines.append(f"  - {text}")
            if len(items) > limit:
                lines.append(f"  … and {len(items) - limit} more")
        return "\n".join(lines)


# --- the check ------------------------------------------------------------------------------


def check(
    histories: Iterable[ClusterHistory],
    hub: Mapping[str, HubWorkload],
    accepted: Collection[str],
    *,
    ended_at: float,
    observed: Mapping[str, Sequence[Observation]] | None = None,
    origin: float = 0.0,
) -> Verdict:
    """Judge a run: `accepted` are `namespace/name` keys the hub answered 201 for, `hub` its
    view at `ended_at` by the same keys, `observed` the terminal states the driver saw each
    workload pass through during the run, in order."""
    observed = observed or {}
    histories = list(histories)
    runs_of: dict[str, list[PodRun]] = defaultdict(list)
    for history in histories:
        for run in history.runs:
            key = run.workload
            if key is not None:
                runs_of[key].append(run)
    overlapping: list[Overlap] = []
    same_generation: list[Overlap] = []
    for key in sorted(runs_of):
        overlaps = _overlaps(key, runs_of[key], ended_at)
        if overlaps:
            overlapping.append(max(overlaps, key=lambda o: o.seconds))
        same = [o for o in overlaps if o.same_generation]
        if same:
            same_generation.append(max(same, key=lambda o: o.seconds))
    lost = tuple(sorted(key for key in accepted if key not in hub))
    terminal = [
        violation
        for key in sorted(set(accepted) | set(runs_of))
        for violation in _terminal(
            key, hub.get(key), _completed(runs_of.get(key, [])), observed.get(key, ()), origin
        )
    ]
    stuck = tuple(
        Stuck(key, hub[key].cluster, hub[key].generation)
        for key in sorted(accepted)
        if key in hub and not hub[key].finished
    )
    return Verdict(
        accepted=len(accepted),
        finished=sum(1 for key in accepted if key in hub and hub[key].finished),
        overlapping=_longest_first(overlapping),
        overlapping_generations=_longest_first(same_generation),
        lost=lost,
        terminal=tuple(terminal),
        stuck=stuck,
        completed_more_than_once=tuple(
            key for key in sorted(runs_of) if len(_completed(runs_of[key])) > 1
        ),
        incomplete_histories=tuple(h.cluster for h in histories if h.dropped),
        origin=origin,
    )


def _longest_first(overlaps: list[Overlap]) -> tuple[Overlap, ...]:
    return tuple(sorted(overlaps, key=lambda o: (-o.seconds, o.workload)))


def _overlaps(key: str, runs: Sequence[PodRun], ended_at: float) -> list[Overlap]:
    timed = [(run, run.interval(ended_at)) for run in runs]
    found = []
    for (a, a_span), (b, b_span) in combinations(timed, 2):
        if a_span is None or b_span is None or a.cluster == b.cluster:
            continue
        together = min(a_span[1], b_span[1]) - max(a_span[0], b_span[0])
        if together > 0:
            first, second = (a, b) if a_span[0] <= b_span[0] else (b, a)
            found.append(Overlap(key, first, second, together))
    return found


def _completed(runs: Sequence[PodRun]) -> list[tuple[str, int | None]]:
    """The runs (cluster, generation) in which a pod of the workload Succeeded."""
    return sorted(
        {(run.cluster, run.generation) for run in runs if run.outcome == SUCCEEDED},
        key=lambda place: (place[1] or 0, place[0]),
    )


def _terminal(
    key: str,
    wl: HubWorkload | None,
    completed: Sequence[tuple[str, int | None]],
    observed: Sequence[Observation],
    origin: float,
) -> list[TerminalViolation]:
    found = []
    changes = _changes_after_finishing(observed)
    if changes:
        steps = ", then ".join(
            f"{seen.reason or 'not finished'} at {seen.at - origin:.1f}s" for seen in changes
        )
        found.append(TerminalViolation(key, f"its terminal state changed: {steps}"))
    if wl is None:
        return found
    if len(wl.finished_reasons) > 1:
        found.append(
            TerminalViolation(
                key,
                f"the hub shows {len(wl.finished_reasons)} Finished conditions: "
                + ", ".join(wl.finished_reasons),
            )
        )
    if wl.finished_reasons == (SUCCEEDED,) and not completed:
        found.append(
            TerminalViolation(
                key,
                f"the hub says Succeeded (on {wl.cluster}, generation {wl.generation}) but no pod "
                "of it succeeded in any cluster",
            )
        )
    return found


def _changes_after_finishing(observed: Sequence[Observation]) -> list[Observation]:
    """From the first terminal state on, every observation if any differs from it; else []."""
    first = next((i for i, seen in enumerate(observed) if seen.reason is not None), None)
    if first is None:
        return []
    tail = list(observed[first:])
    if all(seen.reason == tail[0].reason for seen in tail):
        return []
    return tail
