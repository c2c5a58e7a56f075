"""Flavor assignment: which resource flavor each pod set's resources use, and in what mode.

Owns `assign_flavors`, called by `cycle` (and by `gang` for reduced counts) with the
cycle's `QuotaTree` and the queue's `QueueFlavors` (what assignment reads of a cluster queue,
built once per queue and cycle). For each pod set and each of the cluster queue's resource groups it
walks the group's flavors in order, skipping flavors whose node labels contradict the pod
set's node selector or required affinity (only label keys the flavor declares are
compared, as in Kueue) and flavors with NoSchedule/NoExecute taints the pod set does not
tolerate. Each remaining flavor gets a mode per requested resource — fits now, could fit
by preempting, or cannot fit — and the flavorFungibility policy picks one (kueue.md §2.4).

A pod set's resource is always assigned to exactly one flavor, so "borrows from one flavor
only" holds by construction. Pod sets of one workload accumulate: the second pod set's
request in a flavor is checked together with the first's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.engine.quota import QuotaNode, QuotaTree
from agent.engine.result import FlavorAttempt, Shortfall
from agent.engine.snapshot import (
    PODS,
    ClusterQueue,
    FlavorName,
    FlavorResource,
    FungibilityPolicy,
    FungibilityPreference,
    PodSet,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceName,
    Topology,
    UndeclaredResources,
    Workload,
)
from agent.engine.topology import tas_mismatch, tas_only

__all__ = [
    "Assignment",
    "Mode",
    "PodSetFlavors",
    "QueueFlavors",
    "assign_flavors",
    "flavor_mismatch",
]


class Mode(enum.IntEnum):
    """How well a flavor (or a whole assignment) fits; larger is better."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


# The members as module constants for the loops below: in Python 3.11 reading a member off
# its Enum class costs about ten times a global lookup, and assignment compares modes for
# every pending workload of every cycle.
_FIT, _PREEMPT, _NO_FIT = Mode.FIT, Mode.PREEMPT, Mode.NO_FIT
# The shortfall and flavor attempt of most pending workloads of every cycle are built through
# `tuple.__new__`: the same named tuple as calling the class, without the Python-level
# `__new__` a named tuple gets (a frame and an argument tuple less).
_new = tuple.__new__


@dataclass(slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: dict[ResourceName, FlavorName]
    usage: dict[ResourceName, int]


@dataclass(slots=True, init=False)
class Assignment:
    """The outcome of flavor assignment for one workload (mutable, cycle-internal)."""

    pod_sets: list[PodSetFlavors]
    mode: Mode
    borrowing: bool
    usage: dict[FlavorResource, int]
    needs_preemption: set[FlavorResource]
    shortfalls: list[Shortfall]
    attempts: list[FlavorAttempt]
    exceeds_max: bool
    """Some cell cannot fit even if nothing else ran."""
    no_flavor: bool
    """Some pod set had no flavor whose labels/taints match (or an undeclared resource)."""
    no_candidates: bool
    """Some flavor needed preemption but had no workload that may be preempted."""
    topology_reason: str | None
    """Quota fits (or preemption would make it), but the pods cannot be placed in the
    flavor's topology: why (set by the cycle after the placement)."""

    def __init__(self) -> None:
        # Written out: one is built for every pending workload a cycle looks at, and the
        # generated `__init__` of default factories costs twice this.
        self.pod_sets = []
        self.mode = _FIT
        self.borrowing = False
        self.usage = {}
        self.needs_preemption = set()
        self.shortfalls = []
        self.attempts = []
        self.exceeds_max = False
        self.no_flavor = False
        self.no_candidates = False
        self.topology_reason = None


def flavor_mismatch(flavor: ResourceFlavor, ps: PodSet) -> str | None:
    """Why the pod set cannot run on the flavor's nodes, or None if it can."""
    labels = flavor.node_labels
    if labels:
        for key, value in ps.node_selector.items():
            if key in labels and labels[key] != value:
                return f"node selector {key}={value} does not match flavor label {labels[key]}"
        if ps.required_affinity and not any(
            all(req.matches(labels) for req in term.match_expressions if req.key in labels)
            for term in ps.required_affinity
        ):
            return "required node affinity does not match the flavor's node labels"
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if any(t.tolerates(taint) for t in ps.tolerations):
            continue
        if any(t.tolerates(taint) for t in flavor.tolerations):
            continue
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    return None


_RANKS = {
    FungibilityPreference.BORROWING_OVER_PREEMPTION: {
        (Mode.FIT, False): 4,
        (Mode.FIT, True): 3,
        (Mode.PREEMPT, False): 2,
        (Mode.PREEMPT, True): 1,
    },
    FungibilityPreference.PREEMPTION_OVER_BORROWING: {
        (Mode.FIT, False): 4,
        (Mode.PREEMPT, False): 3,
        (Mode.FIT, True): 2,
        (Mode.PREEMPT, True): 1,
    },
}
"""Kueue's preference among candidate flavors: fit > fit-borrowing ≷ preempt > ..."""


_Option = tuple[FlavorName, ResourceFlavor | None, bool]
_Grouped = tuple[tuple[tuple[int, tuple[ResourceName, ...]], ...], tuple[ResourceName, ...]]
"""A pod set's requested resources by resource group (index, resources), and the uncovered."""
_Best = tuple[int, Mode, bool, FlavorName, list[Shortfall], set[FlavorResource] | None]
"""The flavor chosen so far: rank, mode, borrowing, name, shortfalls, cells to preempt in."""


def group_index(cq: ClusterQueue) -> dict[ResourceName, int]:
    """Resource → index of the resource group covering it."""
    return {res: i for i, g in enumerate(cq.resource_groups) for res in g.covered_resources}


class QueueFlavors:
    """What flavor assignment reads of one cluster queue that no workload changes: its
    resource groups' flavors (with their specs), its preemption and fungibility rules, and
    its place in the quota tree. The cycle builds one per queue it evaluates (`for_queue`)
    and hands it to `assign_flavors` for every workload of that queue."""

    __slots__ = (
        "covers_pods",
        "cq",
        "deep",
        "fallbacks",
        "grouping",
        "groups",
        "implied",
        "may_borrow_preempt",
        "may_preempt",
        "node",
        "options",
        "preferred",
        "ranks",
        "stop_borrowing",
        "stop_preempting",
    )

    def __init__(
        self,
        cq: ClusterQueue,
        node: QuotaNode,
        flavors: Mapping[FlavorName, ResourceFlavor],
        *,
        fair_sharing: bool = False,
    ) -> None:
        self.cq = cq
        self.node = node
        self.groups = group_index(cq)
        self.covers_pods = PODS in self.groups
        self.grouping: dict[tuple[ResourceName, ...], _Grouped] = {}
        """`grouped` per pod sets' `asked`."""
        self.options: tuple[tuple[_Option, ...], ...] = tuple(
            tuple(
                (
                    fq.flavor,
                    (spec := flavors.get(fq.flavor)),
                    # Only these can turn a pod set away (labels, taints, topology).
                    spec is not None
                    and (
                        bool(spec.node_labels or spec.node_taints) or spec.topology_name is not None
                    ),
                )
                for fq in g.flavors
            )
            for g in cq.resource_groups
        )
        """Per resource group, its flavors in order: (name, spec or None, screens pod sets)."""
        self.fallbacks = any(len(group) > 1 for group in self.options)
        """Whether some group has a flavor to fall back on: only then is the preemption
        oracle asked."""
        self.preferred: tuple[tuple[ResourceName, FlavorResource], ...] = tuple(
            (res, (g.flavors[0].flavor, res))
            for g in cq.resource_groups
            if g.flavors
            for res in g.covered_resources
        )
        """Each covered resource with its cell in the group's first flavor (the cycle orders
        a queue's head by whether it would borrow there)."""
        p = cq.preemption
        self.may_preempt = (
            p.within_cluster_queue is not PreemptionPolicy.NEVER
            or p.reclaim_within_cohort is not PreemptionPolicy.NEVER
        )
        # Under fair sharing a request beyond nominal may preempt too, as with
        # borrowWithinCohort (the fair-sharing strategies then decide which victims are fair).
        self.may_borrow_preempt = (
            fair_sharing or p.borrow_within_cohort.policy is not PreemptionPolicy.NEVER
        )
        self.deep = node.parent is not None and node.parent.parent is not None
        fungibility = cq.flavor_fungibility
        self.ranks = _RANKS[fungibility.preference]
        self.stop_borrowing = fungibility.when_can_borrow is FungibilityPolicy.MAY_STOP_SEARCH
        self.stop_preempting = fungibility.when_can_preempt is FungibilityPolicy.MAY_STOP_SEARCH
        # (Only a flavor with a topology reads it: it screens pod sets.)
        self.implied = any(o[2] for g in self.options for o in g) and tas_only(cq, flavors)
        """A TAS-only queue (every flavor has a topology): pod sets asking for none are
        placed as unconstrained."""

    def grouped(self, ps: PodSet) -> _Grouped:
        """The resources the pod set asks for — and one pod's worth of `pods` when the queue
        covers it — by resource group (groups in order of first request, each group's
        resources in request order), and those no group covers. The same for every pod set
        that asks for the same resources, so worked out once per queue and cycle."""
        if self.covers_pods and PODS in ps.requests:
            # (Its own `pods` request, replaced by one pod in its place: rare, not kept.)
            one_pod = {**ps.requests, PODS: 1000}
            return self._group(tuple(res for res, amount in one_pod.items() if amount > 0))
        found = self.grouping.get(ps.asked)
        if found is None:
            asked = (*ps.asked, PODS) if self.covers_pods else ps.asked
            found = self.grouping[ps.asked] = self._group(asked)
        return found

    def _group(self, asked: tuple[ResourceName, ...]) -> _Grouped:
        by_group: dict[int, list[ResourceName]] = {}
        uncovered: list[ResourceName] = []
        for res in asked:
            gi = self.groups.get(res)
            if gi is None:
                uncovered.append(res)
            else:
                by_group.setdefault(gi, []).append(res)
        return tuple((gi, tuple(members)) for gi, members in by_group.items()), tuple(uncovered)


def assign_flavors(
    *,
    tree: QuotaTree,
    queue: QueueFlavors,
    wl: Workload,
    undeclared: UndeclaredResources,
    counts: tuple[int, ...] | None = None,
    oracle: Callable[[dict[FlavorResource, int], set[FlavorResource]], bool] | None = None,
    topologies: Mapping[str, Topology] | None = None,
    excluded: Mapping[int, Mapping[FlavorName, str]] | None = None,
) -> Assignment:
    """Assign a flavor to every requested resource of every pod set of `wl` in `queue`.

    `counts` overrides the pod sets' counts (partial admission tries smaller ones).
    `oracle(request, needs)` says whether preemption could make room for `request`; it is
    asked only when a resource group offers other flavors to fall back on. `topologies`
    (the snapshot's) let flavors with a topology take only pod sets that ask for one, and
    pod sets that ask for one only flavors whose topology has the levels asked for.
    `excluded`: pod set index → flavors it may not take, with why (its pods did not fit the
    flavor's topology).
    """
    # Called for every pending workload a cycle looks at (50,000 in bench.engine_throughput),
    # so the constants come from `queue` and the loops below stay plain.
    out = Assignment()
    node = queue.node
    nominal = node.nominal
    subtree = node.subtree
    usage = out.usage
    attempts = out.attempts
    available = tree.available
    potentials = node.potential  # (`potential_available`'s own memo, read first)
    for idx, ps in enumerate(wl.pod_sets):
        count = ps.count if counts is None else counts[idx]
        per_pod: Mapping[ResourceName, int] = ps.requests
        if queue.covers_pods:
            per_pod = {**per_pod, PODS: 1000}
        by_group, uncovered = queue.grouped(ps)
        if uncovered and undeclared is UndeclaredResources.BLOCK:
            out.no_flavor = True
            out.mode = _NO_FIT
            for res in uncovered:
                attempts.append(
                    FlavorAttempt(ps.name, FlavorName(""), f"resource {res} is not covered")
                )
        psf = PodSetFlavors(ps.name, count, {}, {})
        screen = ps.topology is not None or (excluded is not None and idx in excluded)
        for gi, resources in by_group:
            best: _Best | None = None
            group_shortfalls: list[Shortfall] = []
            exceeds = False
            # Flavors that would do but did not stop the search: attempts unless chosen. (This
            # and a flavor's `needs` are made when first added to: most evaluations of a
            # cycle add nothing.)
            considered: list[tuple[FlavorName, Mode, list[Shortfall]]] | None = None
            any_matching = False
            options = queue.options[gi]
            for fname, spec, screens in options:
                if spec is None:
                    attempts.append(FlavorAttempt(ps.name, fname, "flavor not found"))
                    continue
                if screens or screen:
                    why = _mismatch(queue, fname, spec, ps, idx, excluded, topologies)
                    if why is not None:
                        attempts.append(FlavorAttempt(ps.name, fname, why))
                        continue
                any_matching = True
                fmode = _FIT
                fborrow = False
                shortfalls: list[Shortfall] = []
                needs: set[FlavorResource] | None = None
                for res in resources:
                    fr = (fname, res)
                    if fr not in nominal:
                        fmode = _NO_FIT
                        requested = per_pod[res] * count
                        shortfalls.append(Shortfall(fname, res, requested, 0, 0))
                        exceeds = exceeds or requested > 0
                        continue
                    val = per_pod[res] * count + usage.get(fr, 0)
                    avail = available(node, fr)
                    if val <= avail:
                        if node.usage.get(fr, 0) + val > subtree.get(fr, 0):
                            fborrow = True
                        continue
                    potential = potentials.get(fr)
                    if potential is None:
                        potential = tree.potential_available(node, fr)
                    shortfalls.append(_new(Shortfall, (fname, res, val, avail, potential)))
                    # Kueue: a workload may preempt for a cell if its request fits the
                    # queue's nominal quota, or it may preempt while borrowing
                    # (borrowWithinCohort), or a deeper cohort tree may hold the room.
                    if val > potential:
                        exceeds = True
                        fmode = _NO_FIT
                        continue
                    own = subtree.get(fr, 0)
                    if queue.may_preempt and (val <= own or queue.may_borrow_preempt or queue.deep):
                        if fmode is _FIT:
                            fmode = _PREEMPT
                        if needs is None:
                            needs = {fr}
                        else:
                            needs.add(fr)
                        # As Kueue: preempting borrows if the request alone exceeds nominal.
                        if val > own:
                            fborrow = True
                    else:
                        fmode = _NO_FIT
                if (
                    fmode is _PREEMPT
                    and oracle is not None
                    and len(options) > 1
                    and not oracle(
                        {
                            (fname, r): per_pod[r] * count + usage.get((fname, r), 0)
                            for r in resources
                        },
                        needs or set(),
                    )
                ):
                    # Kueue's preemption oracle: a flavor where no workload may be preempted
                    # is no better than one without room, so a later flavor can win.
                    out.no_candidates = True
                    attempts.append(
                        FlavorAttempt(
                            ps.name,
                            fname,
                            "needs preemption ({}) but no workload may be preempted",
                            tuple(shortfalls),
                        )
                    )
                    group_shortfalls.extend(shortfalls)
                    continue
                if fmode is _NO_FIT:
                    group_shortfalls.extend(shortfalls)
                    attempts.append(_new(FlavorAttempt, (ps.name, fname, "", tuple(shortfalls))))
                    continue
                rank = queue.ranks[(fmode, fborrow)]
                if fmode is _FIT:
                    if not fborrow or queue.stop_borrowing:
                        best = (rank, fmode, fborrow, fname, shortfalls, needs)
                        break
                elif queue.stop_preempting:
                    best = (rank, fmode, fborrow, fname, shortfalls, needs)
                    break
                if best is None or rank > best[0]:
                    best = (rank, fmode, fborrow, fname, shortfalls, needs)
                if considered is None:
                    considered = [(fname, fmode, shortfalls)]
                else:
                    considered.append((fname, fmode, shortfalls))
            if best is None:
                out.mode = _NO_FIT
                if not any_matching:
                    out.no_flavor = True
                out.shortfalls.extend(group_shortfalls)
                if exceeds:
                    out.exceeds_max = True
                continue
            _, fmode, fborrow, fname, shortfalls, needs = best
            for other, mode, lacking in considered or ():
                if other == fname:
                    continue
                attempts.append(
                    FlavorAttempt(
                        ps.name, other, "fits only by borrowing; a later flavor was preferred"
                    )
                    if mode is _FIT
                    else FlavorAttempt(
                        ps.name,
                        other,
                        "needs preemption ({}); a later flavor was preferred",
                        tuple(lacking),
                    )
                )
            out.mode = min(out.mode, fmode)
            if fborrow:
                out.borrowing = True
            out.shortfalls.extend(shortfalls)
            if needs:
                out.needs_preemption |= needs
            for res in resources:
                amount = per_pod[res] * count
                psf.flavors[res] = fname
                psf.usage[res] = amount
                fr = (fname, res)
                usage[fr] = usage.get(fr, 0) + amount
        out.pod_sets.append(psf)
    return out


def _mismatch(
    queue: QueueFlavors,
    fname: FlavorName,
    spec: ResourceFlavor,
    ps: PodSet,
    idx: int,
    excluded: Mapping[int, Mapping[FlavorName, str]] | None,
    topologies: Mapping[str, Topology] | None,
) -> str | None:
    """Why the flavor cannot take the pod set (labels, taints, an earlier topology
    placement, topology rules), or None."""
    why = flavor_mismatch(spec, ps)
    if why is None and excluded is not None and fname in excluded.get(idx, {}):
        why = excluded[idx][fname]
    if why is None and (spec.topology_name is not None or ps.topology is not None):
        topology = (topologies or {}).get(spec.topology_name or "")
        why = tas_mismatch(spec, ps, topology, queue.implied)
    return why
