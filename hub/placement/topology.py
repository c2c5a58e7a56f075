"""PURE topology checks of hub placement: whether a workload's pod sets that require one
domain of a topology level (Kueue's `podset-required-topology`) fit in a cluster now, could
ever fit there, or never can — judged from the room its agent reports per flavor with a
topology (`TopologyRoom` in the capacity report; what it holds and why is explained in
agent/topology_summary.py and docs/topology.md).

For one pod set of N pods, each asking R, and a level L: a reported domain holds, per node
group, `nodes × min over resources of floor(room ÷ R)` pods, summed — exactly what the
agent's engine counts. Only the domains with the most of some resource are reported in full;
for the others the report gives a bound (per resource, the most any of them has in total),
and a shape that fits the bound is taken to fit (the agent decides exactly): the hub never
calls "no room" what might have room. It looks at every flavor of the workload's cluster
queue in that cluster that has the level (the agent picks the flavor).

A preferred level does not restrict where a workload goes, nor do unconstrained requests or
slices (`podset-slice-required-topology`: the whole level would be needed to count slices):
the agent places them. A cluster whose agent sends no topology report (an older agent) is
not judged.

Until the cluster reports again, an offer's pod sets take their room from the domain they
were judged to fit (`take_offered`), so two gangs are not offered one free rack.

Called by: hub.placement.core (the verdict per cluster), hub.placement.cycle (the needs of
a workload, the room its offers book), hub.fleet (the views of the reports, minus the room
open offers book). No I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from api.quantity import Quantity
from api.v1alpha1.messages import DomainRoom, TopologyRoom
from api.v1alpha1.workload import Workload

__all__ = [
    "DomainView",
    "Fit",
    "LevelView",
    "TopologyJudgement",
    "TopologyNeed",
    "TopologyView",
    "judge",
    "level_word",
    "pods_fitting",
    "take_offered",
    "topology_needs",
    "topology_views",
]

_POD = 1000
"""One pod in milli-units of the `pods` resource."""
_UNLIMITED = 1 << 30
"""Pods that fit where no requested resource is counted."""

Room = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class TopologyNeed:
    """A pod set that requires all its pods in one domain of `level` (a node label)."""

    pod_set: str
    level: str
    pods: int
    per_pod: tuple[tuple[str, int], ...]
    """What one pod requests, milli-units, `pods` included (one pod is 1000)."""


@dataclass(frozen=True, slots=True)
class DomainView:
    name: str
    groups: tuple[tuple[int, Room], ...]
    """(how many nodes, the room of each) in milli-units."""


@dataclass(frozen=True, slots=True)
class LevelView:
    level: str
    free: tuple[DomainView, ...]
    free_elsewhere: Room
    allocatable: tuple[DomainView, ...]
    allocatable_elsewhere: Room


@dataclass(frozen=True, slots=True)
class TopologyView:
    """One flavor's topology as a cluster reported it, by level label."""

    flavor: str
    topology: str
    levels: Mapping[str, LevelView]


class Fit(enum.Enum):
    NOW = "now"
    LATER = "later"
    """No domain has the room now; one could when its work ends."""
    NEVER = "never"


_ORDER = (Fit.NOW, Fit.LATER, Fit.NEVER)
"""From best to worst."""


@dataclass(frozen=True, slots=True)
class TopologyJudgement:
    fit: Fit
    message: str


def level_word(label: str) -> str:
    """A level's label as a word for messages: `example.com/topology-rack` → `rack`."""
    if label == "kubernetes.io/hostname":
        return "node"
    word = label.rsplit("/", 1)[-1]
    at = word.find("topology-")
    return word[at + len("topology-") :] if at >= 0 else word


# --- the reports ------------------------------------------------------------------------------


def _room(amounts: Mapping[str, Quantity]) -> dict[str, int]:
    return {res: q.milli() for res, q in amounts.items()}


def _domains(rooms: Iterable[DomainRoom]) -> tuple[DomainView, ...]:
    return tuple(
        DomainView(d.name, tuple((g.nodes, _room(g.room)) for g in d.nodes)) for d in rooms
    )


def topology_views(rooms: Sequence[TopologyRoom] | None) -> dict[str, TopologyView] | None:
    """A capacity report's topologies by flavor; None when the agent sent none (older)."""
    if rooms is None:
        return None
    return {
        room.flavor: TopologyView(
            room.flavor,
            room.topology,
            {
                level.level: LevelView(
                    level.level,
                    _domains(level.free),
                    _room(level.free_elsewhere),
                    _domains(level.allocatable),
                    _room(level.allocatable_elsewhere),
                )
                for level in room.levels
            },
        )
        for room in rooms
    }


# --- the workloads ----------------------------------------------------------------------------


_NEEDS_MEMO: dict[str, tuple[TopologyNeed, ...]] = {}


def _needs_of(wl: Workload) -> tuple[TopologyNeed, ...]:
    out = []
    for ps in wl.spec.pod_sets:
        request = ps.topology_request
        if request is None or request.required is None or ps.count <= 0:
            continue
        if request.pod_set_slice_required_topology or request.pod_set_group_name:
            continue  # slices and groups: the agent places them (see the module docstring)
        per_pod = {res: q.milli() for res, q in ps.pod_requests().items() if q.milli() > 0}
        per_pod["pods"] = _POD
        out.append(
            TopologyNeed(ps.name, request.required, ps.count, tuple(sorted(per_pod.items())))
        )
    return tuple(out)


def topology_needs(wl: Workload) -> tuple[TopologyNeed, ...]:
    """The pod sets of `wl` that require one domain of a level (remembered per uid: pod sets
    are immutable)."""
    uid = wl.metadata.uid
    if uid is None:
        return _needs_of(wl)
    found = _NEEDS_MEMO.get(uid)
    if found is None:
        if len(_NEEDS_MEMO) > 100_000:
            _NEEDS_MEMO.clear()
        found = _NEEDS_MEMO[uid] = _needs_of(wl)
    return found


# --- the judgement ----------------------------------------------------------------------------


def _node_fit(room: Room, per_pod: Iterable[tuple[str, int]]) -> int:
    best = _UNLIMITED
    for res, amount in per_pod:
        have = room.get(res)
        if have is None:
            if res == "pods":
                continue  # a node that does not count pods limits none (as the engine)
            return 0
        best = min(best, max(0, have) // amount)
        if not best:
            return 0
    return best


def pods_fitting(domain: DomainView, per_pod: Iterable[tuple[str, int]]) -> int:
    """How many pods of the shape the domain's nodes hold."""
    shape = tuple(per_pod)
    return sum(nodes * _node_fit(room, shape) for nodes, room in domain.groups)


@dataclass(frozen=True, slots=True)
class _Look:
    """One level of one flavor, for one need: the best-fit domain (or None), the largest
    count of pods any reported domain holds, and whether an unreported one might hold it."""

    best: tuple[int, str] | None
    largest: int
    maybe_elsewhere: bool


def _look(domains: Sequence[DomainView], elsewhere: Room, need: TopologyNeed) -> _Look:
    best: tuple[int, str] | None = None
    largest = 0
    for domain in domains:
        held = pods_fitting(domain, need.per_pod)
        largest = max(largest, held)
        if held >= need.pods and (best is None or (held, domain.name) < best):
            best = (held, domain.name)  # the smallest that holds it (the engine's best fit)
    maybe = bool(elsewhere) and _node_fit(elsewhere, need.per_pod) >= need.pods
    return _Look(best, largest, maybe)


def _pods(n: int) -> str:
    return "1 pod" if n == 1 else f"{n} pods"


def _judge_one(
    topologies: Mapping[str, TopologyView], flavors: Sequence[str], need: TopologyNeed
) -> TopologyJudgement:
    word = level_word(need.level)
    levels = [
        level
        for flavor in flavors
        if (view := topologies.get(flavor)) is not None
        and (level := view.levels.get(need.level)) is not None
    ]
    if not levels:
        return TopologyJudgement(
            Fit.NEVER, f"no flavor of its cluster queue has a topology with level {word}"
        )
    now = [_look(level.free, level.free_elsewhere, need) for level in levels]
    fitting = sorted(look.best for look in now if look.best is not None)
    if fitting:
        return TopologyJudgement(Fit.NOW, f"fits {word} {fitting[0][1]}")
    if any(look.maybe_elsewhere for look in now):
        return TopologyJudgement(
            Fit.NOW, f"may fit a {word} (not among the {word}s it reported in full)"
        )
    largest = max(look.largest for look in now)
    ever = [_look(level.allocatable, level.allocatable_elsewhere, need) for level in levels]
    if any(look.best is not None or look.maybe_elsewhere for look in ever):
        return TopologyJudgement(
            Fit.LATER, f"no free {word} holds {_pods(need.pods)} (largest {largest})"
        )
    most = max(look.largest for look in ever)
    return TopologyJudgement(
        Fit.NEVER, f"no {word} could ever hold {_pods(need.pods)} (largest {most} when empty)"
    )


def judge(
    topologies: Mapping[str, TopologyView] | None,
    flavors: Sequence[str],
    needs: Sequence[TopologyNeed],
) -> TopologyJudgement | None:
    """Whether the needs fit a cluster with these reported topologies, through the flavors
    of the workload's cluster queue there (in its order); None: the cluster reported no
    topologies (an older agent), nothing is judged. The worst pod set decides."""
    if topologies is None or not needs:
        return None
    judged = [(need, _judge_one(topologies, flavors, need)) for need in needs]
    worst = max((j.fit for _, j in judged), key=_ORDER.index)
    named = len(needs) > 1
    message = "; ".join(
        f"pod set {need.pod_set}: {j.message}" if named else j.message
        for need, j in judged
        if j.fit is worst
    )
    return TopologyJudgement(worst, message)


# --- room booked by offers --------------------------------------------------------------------


def _minus(room: Room, per_pod: Iterable[tuple[str, int]], pods: int) -> Room:
    out = dict(room)
    for res, amount in per_pod:
        if res in out:
            out[res] -= amount * pods
    return out


def _take_from(domain: DomainView, per_pod: tuple[tuple[str, int], ...], pods: int) -> DomainView:
    """The domain with `pods` pods placed on its nodes, group by group, each node filled."""
    left = pods
    groups: list[tuple[int, Room]] = []
    for nodes, room in domain.groups:
        each = _node_fit(room, per_pod)
        if left <= 0 or each <= 0:
            groups.append((nodes, room))
            continue
        each = min(each, left)
        full = min(nodes, left // each)
        if full:
            groups.append((full, _minus(room, per_pod, each)))
            left -= full * each
        rest = nodes - full
        if rest and left > 0:
            groups.append((1, _minus(room, per_pod, left)))
            left, rest = 0, rest - 1
        if rest:
            groups.append((rest, room))
    return DomainView(domain.name, tuple(groups))


def take_offered(
    topologies: Mapping[str, TopologyView],
    flavors: Sequence[str],
    needs: Sequence[TopologyNeed],
) -> Mapping[str, TopologyView]:
    """The reported room with an offer's pod sets taken from the domains `judge` found for
    them (the best fit of the level, in the first flavor that has one), so the next workload
    is not offered the same domain before the cluster reports again. Domains of other levels
    and the bound on unreported ones are left as they are (the report does not say which
    domain lies in which)."""
    out = dict(topologies)
    for need in needs:
        chosen: tuple[int, str, str] | None = None
        for flavor in flavors:
            view = out.get(flavor)
            level = view.levels.get(need.level) if view is not None else None
            if level is None:
                continue
            look = _look(level.free, level.free_elsewhere, need)
            if look.best is not None and (chosen is None or look.best < chosen[:2]):
                chosen = (*look.best, flavor)
        if chosen is None:
            continue
        _, name, flavor = chosen
        view = out[flavor]
        level = view.levels[need.level]
        free = tuple(
            _take_from(d, need.per_pod, need.pods) if d.name == name else d for d in level.free
        )
        levels = {**view.levels, need.level: replace(level, free=free)}
        out[flavor] = replace(view, levels=levels)
    return out
