"""Topology-aware placement: which domains (block, rack, host) a pod set's pods go to.

Owns `Placer`, the cycle's working picture of free node capacity for the flavors that have
a topology (kueue.md §4), built once per cycle from the snapshot's nodes and then updated in
place: admissions and reservations take capacity, a preemption simulation gives it back and
takes it again. `cycle` asks it, after flavor assignment, where a pod set fits; the answer is
a `TopologyAssignment` (pods per domain of the topology's lowest level) or a reason naming
the level, the largest free domain and the shortfall.

The model:

- a flavor's domains are the schedulable nodes that carry its node labels and every level's
  label, grouped by the levels' values, widest first; free capacity of a node is its
  allocatable minus `Node.usage` (every bound pod except those of topology-placed
  workloads) minus the assignments of the admitted workloads (assumed until their pods
  run) minus what this cycle admitted or reserved;
- a pod set fits a node as many times as every per-pod request (and one `pods`) fits its
  free capacity; taints the pod set (or its flavor) does not tolerate, and its node selector
  and required node affinity, rule nodes out; a domain holds the sum of its nodes' pods;
- required: one domain of the level, or wait; preferred: one domain of the level if one
  fits, else one domain a level up (the fewest domains of the level below it), up to the
  whole topology; unconstrained: any nodes, fullest first; slices: every `slice_size` pods in
  one domain of the slice level, counted in whole slices above it; a group of pod sets (one
  group name) goes into one domain together;
- best fit at every level (Kueue's BestFit): take the domains with the most room until the
  rest fits in one, then the smallest domain it fits in — the fewest domains, and the least
  room left broken up.

When the lowest level is not the hostname, an admitted assignment is spread over the nodes of
its domain, each filled as far as it goes in name order: kube-scheduler decides the nodes, so
the engine's split is an estimate of the same total.

No I/O, no clock: a pure part of the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from agent.engine.snapshot import (
    PODS,
    ClusterQueue,
    FlavorName,
    Node,
    PodSet,
    ResourceFlavor,
    ResourceName,
    Snapshot,
    Taint,
    Toleration,
    Topology,
    TopologyAssignment,
    TopologyMode,
    TopologyRequest,
    Workload,
    WorkloadId,
)

__all__ = [
    "Ask",
    "Placed",
    "Placer",
    "Unplaced",
    "level_name",
    "tas_mismatch",
    "tas_only",
]

_POD = 1000
"""One pod in milli-units of the `pods` resource."""

_IDLE_CYCLES = 64
"""Cycles a shape's per-node counts are kept unread: one that waits comes back within a few
cycles, and building its counts again costs a pass over the nodes; one gone costs an update
on every capacity change until it is let go."""

_UNCONSTRAINED = TopologyRequest(TopologyMode.UNCONSTRAINED)
"""The implicit request of a pod set without one in a TAS-only cluster queue."""

K = TypeVar("K", str, tuple[str, ...])

Prefix = tuple[str, ...]
"""A domain: the values of the levels from the widest down to its own (() is everything)."""


def level_name(label: str) -> str:
    """A level's label as a word for messages: `example.com/topology-rack` → `rack`."""
    if label == "kubernetes.io/hostname":
        return "node"
    word = label.rsplit("/", 1)[-1]
    at = word.find("topology-")
    return word[at + len("topology-") :] if at >= 0 else word


def tas_only(cq: ClusterQueue, flavors: Mapping[FlavorName, ResourceFlavor]) -> bool:
    """Whether every flavor of the cluster queue has a topology (Kueue's TAS-only queue,
    where a pod set without a request is placed as unconstrained)."""
    names = [fq.flavor for g in cq.resource_groups for fq in g.flavors]
    return bool(names) and all(
        (f := flavors.get(n)) is not None and f.topology_name is not None for n in names
    )


def tas_mismatch(
    flavor: ResourceFlavor, ps: PodSet, topology: Topology | None, implied: bool
) -> str | None:
    """Why the flavor cannot take the pod set for topology reasons (Kueue's rules), or None:
    a request needs a flavor with a topology that has the level; a flavor with a topology
    takes only pod sets that ask for one, unless the queue is TAS-only (`implied`)."""
    request = ps.topology
    if request is not None:
        if flavor.topology_name is None:
            return "does not support topology-aware scheduling"
        if topology is None:
            return f"topology {flavor.topology_name} not found"
        for label in (request.level, request.slice_level):
            if label is not None and label not in topology.levels:
                return f"topology {flavor.topology_name} has no level {label}"
        return None
    if flavor.topology_name is not None and not implied:
        return "supports only topology-aware scheduling"
    return None


@dataclass(frozen=True, slots=True)
class Ask:
    """One pod set to place: its index in the workload, its flavor and its count."""

    index: int
    pod_set: PodSet
    flavor: FlavorName
    count: int
    request: TopologyRequest


@dataclass(slots=True)
class Placed:
    """Where one pod set goes: the assignment, and the node counts it took (to undo)."""

    index: int
    assignment: TopologyAssignment
    per_pod: dict[ResourceName, int]
    on_nodes: list[tuple[str, int]]


class _View:
    """The domains of one flavor with a topology: eligible nodes grouped by level values."""

    __slots__ = (
        "by_depth",
        "children",
        "flavor",
        "leaves",
        "levels",
        "nodes",
        "prefixes",
        "topology",
    )

    def __init__(
        self, flavor: ResourceFlavor, levels: tuple[str, ...], nodes: Iterable[Node]
    ) -> None:
        self.flavor = flavor
        self.topology = flavor.topology_name or ""
        self.levels = levels
        self.nodes: list[Node] = []
        self.prefixes: dict[str, list[Prefix]] = {}
        """Node name → its domains, the whole topology first, its lowest domain last."""
        self.children: dict[Prefix, list[Prefix]] = {}
        self.by_depth: list[list[Prefix]] = [[] for _ in range(len(levels) + 1)]
        self.leaves: dict[Prefix, list[str]] = {}
        """A lowest-level domain → its nodes, in name order."""
        wanted = flavor.node_labels
        seen: set[Prefix] = set()
        for node in sorted(nodes, key=lambda n: n.name):
            labels = node.labels
            if not node.schedulable or any(labels.get(k) != v for k, v in wanted.items()):
                continue
            if any(label not in labels for label in levels):
                continue
            path = tuple(labels[label] for label in levels)
            chain = [path[:i] for i in range(len(levels) + 1)]
            self.nodes.append(node)
            self.prefixes[node.name] = chain
            self.leaves.setdefault(path, []).append(node.name)
            for depth, prefix in enumerate(chain):
                if prefix not in seen:
                    seen.add(prefix)
                    self.by_depth[depth].append(prefix)
                    if depth:
                        self.children.setdefault(chain[depth - 1], []).append(prefix)

    @property
    def depth(self) -> int:
        return len(self.levels)

    def depth_of(self, label: str | None) -> int:
        """The depth of a level's domains (1 = widest); None: the lowest level."""
        return self.depth if label is None else self.levels.index(label) + 1

    def nodes_of(self, prefix: Prefix) -> list[str]:
        return self.leaves.get(prefix, [])


def _tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def _eligible(node: Node, ps: PodSet, flavor: ResourceFlavor) -> bool:
    labels = node.labels
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not (
            _tolerated(taint, ps.tolerations) or _tolerated(taint, flavor.tolerations)
        ):
            return False
    if any(labels.get(k) != v for k, v in ps.node_selector.items()):
        return False
    return not ps.required_affinity or any(
        all(req.matches(labels) for req in term.match_expressions) for term in ps.required_affinity
    )


class _Counts:
    """How many pods of one per-pod request fit each node of a view and each domain; kept
    current as capacity changes (only the changed node's domains are touched)."""

    __slots__ = ("fit", "per_pod", "sums", "view")

    def __init__(
        self, view: _View, per_pod: dict[ResourceName, int], nodes: list[str], placer: Placer
    ) -> None:
        self.view = view
        self.per_pod = per_pod
        self.fit: dict[str, int] = {}
        self.sums: dict[Prefix, int] = dict.fromkeys(view.children, 0)
        for depth_prefixes in view.by_depth:
            for prefix in depth_prefixes:
                self.sums[prefix] = 0
        for name in nodes:
            f = placer.fit(name, per_pod)
            self.fit[name] = f
            if f:
                for prefix in view.prefixes[name]:
                    self.sums[prefix] += f

    def update(self, name: str, f: int) -> None:
        delta = f - self.fit[name]
        if delta:
            self.fit[name] = f
            sums = self.sums
            for prefix in self.view.prefixes[name]:
                sums[prefix] += delta


class _UnplacedError(Exception):
    """A pod set does not fit; the message says why (caught inside this module)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True, slots=True)
class Unplaced:
    """Why the pod set at `index` (the first that failed) cannot be placed."""

    index: int
    reason: str


class Placer:
    """Free node capacity for the flavors with a topology, over one cycle — or over many:
    `schedule_incremental` keeps one in its carry, so the domains, each node's free room and
    the admitted workloads' assignments are worked out again only for what changed."""

    __slots__ = (
        "counts",
        "cycles",
        "free",
        "held",
        "journal",
        "loaded",
        "nodes",
        "references",
        "snapshot",
        "used",
        "views",
        "watchers",
    )

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.references: tuple[object, ...] = ()
        """The flavors and topologies the views were built for."""
        self.nodes: Mapping[str, Node] = {}
        self.free: dict[str, dict[ResourceName, int]] = {}
        self.views: dict[FlavorName, _View | None] = {}
        self.counts: dict[tuple[object, ...], _Counts] = {}
        self.used: dict[tuple[object, ...], int] = {}
        """Each count's last cycle a placement read it (counted by `cycles`); one unread for
        `_IDLE_CYCLES` is let go (its shape no longer waits)."""
        self.cycles = 0
        self.watchers: dict[str, list[_Counts]] = {}
        """Node name → the counts that include it (updated when its capacity changes)."""
        self.held: dict[WorkloadId, list[tuple[str, dict[ResourceName, int], int]]] = {}
        """Admitted workloads' pods on nodes: (node, per-pod usage, pods)."""
        self.loaded: dict[WorkloadId, object] = {}
        """The admission each held workload's pods were taken for."""
        self.journal: list[Placed] = []
        """What this cycle admitted or reserved: given back at its end (the next snapshot
        says what was applied)."""

    # the cycle's frame ----------------------------------------------------------------------

    def begin(self, snapshot: Snapshot, running: Iterable[Workload]) -> None:
        """Bring the capacity to `snapshot`: its nodes, and the admitted workloads' (in
        `running`) assignments."""
        references = (snapshot.flavors, snapshot.topologies)
        if len(references) != len(self.references) or any(
            a is not b for a, b in zip(references, self.references, strict=True)
        ):
            self._reset(snapshot)
        elif snapshot.nodes is not self.nodes:
            self._sync_nodes(snapshot)
        self.snapshot = snapshot
        seen = set()
        for wl in running:
            adm = wl.admission
            assert adm is not None
            if not any(ps.topology is not None for ps in adm.pod_sets):
                continue
            seen.add(wl.id)
            if self.loaded.get(wl.id) is adm:
                continue
            if wl.id in self.loaded:
                self.release([wl.id])
            self._load(wl)
        for wid in [w for w in self.loaded if w not in seen]:
            self.release([wid])
            del self.loaded[wid]
            self.held.pop(wid, None)

    def end(self) -> None:
        """Give back what the cycle admitted or reserved, and let go of counts no placement
        read for a while (shapes no longer waiting)."""
        self.undo(self.journal)
        self.journal.clear()
        self.cycles += 1
        stale = self.cycles - _IDLE_CYCLES
        for key in [k for k, last in self.used.items() if last < stale]:
            del self.used[key]
            counts = self.counts.pop(key)
            for name in counts.fit:
                watching = self.watchers.get(name)
                if watching is not None:
                    watching.remove(counts)

    def _reset(self, snapshot: Snapshot) -> None:
        self.references = (snapshot.flavors, snapshot.topologies)
        self.nodes = snapshot.nodes
        self.free.clear()
        self.views.clear()
        self.counts.clear()
        self.used.clear()
        self.watchers.clear()
        self.held.clear()
        self.loaded.clear()
        self.snapshot = snapshot

    def _sync_nodes(self, snapshot: Snapshot) -> None:
        """Take the nodes' changes: free room moves with allocatable and pod usage; a node
        added, gone, relabelled, tainted or cordoned changes the domains (built again)."""
        new = snapshot.nodes
        old = self.nodes
        if new.keys() != old.keys():
            self._reset(snapshot)
            return
        changed = []
        for name, node in new.items():
            before = old[name]
            if before is node:
                continue
            if (
                before.labels != node.labels
                or before.taints != node.taints
                or before.schedulable != node.schedulable
            ):
                self._reset(snapshot)
                return
            changed.append((name, before, node))
        self.nodes = new
        for name, before, node in changed:
            free = self.free.get(name)
            if free is None:
                continue  # not read yet: built from the new node when it is
            for res in before.allocatable.keys() | node.allocatable.keys():
                free[res] = free.get(res, 0) + node.allocatable.get(res, 0)
                free[res] -= before.allocatable.get(res, 0)
            for res in before.usage.keys() | node.usage.keys():
                free[res] = free.get(res, 0) - node.usage.get(res, 0) + before.usage.get(res, 0)
            for counts in self.watchers.get(name, ()):
                counts.update(name, self.fit(name, counts.per_pod))

    # capacity -------------------------------------------------------------------------------

    def _free(self, name: str) -> dict[ResourceName, int]:
        found = self.free.get(name)
        if found is None:
            node = self.nodes[name]
            found = dict(node.allocatable)
            for res, amount in node.usage.items():
                found[res] = found.get(res, 0) - amount
            self.free[name] = found
        return found

    def fit(self, name: str, per_pod: Mapping[ResourceName, int]) -> int:
        free = self._free(name)
        best: int | None = None
        for res, amount in per_pod.items():
            if amount <= 0:
                continue
            if res == PODS and res not in free:
                continue  # a node that does not count pods limits none
            n = max(0, free.get(res, 0)) // amount
            if best is None or n < best:
                best = n
                if not n:
                    return 0
        return 1 << 30 if best is None else best

    def _take(self, name: str, per_pod: Mapping[ResourceName, int], pods: int) -> None:
        free = self._free(name)
        for res, amount in per_pod.items():
            free[res] = free.get(res, 0) - amount * pods
        for counts in self.watchers.get(name, ()):
            counts.update(name, self.fit(name, counts.per_pod))

    def view(self, flavor: FlavorName) -> _View | None:
        try:
            return self.views[flavor]
        except KeyError:
            pass
        assert self.snapshot is not None
        spec = self.snapshot.flavors.get(flavor)
        found: _View | None = None
        if spec is not None and spec.topology_name is not None:
            topology = self.snapshot.topologies.get(spec.topology_name)
            if topology is not None:
                found = _View(spec, topology.levels, self.nodes.values())
        self.views[flavor] = found
        return found

    def _counts(self, view: _View, ps: PodSet, per_pod: dict[ResourceName, int]) -> _Counts:
        key = (
            view.flavor.name,
            tuple(sorted(per_pod.items())),
            tuple(sorted(ps.node_selector.items())),
            ps.required_affinity,
            ps.tolerations,
        )
        self.used[key] = self.cycles
        found = self.counts.get(key)
        if found is None:
            nodes = [n.name for n in view.nodes if _eligible(n, ps, view.flavor)]
            found = self.counts[key] = _Counts(view, per_pod, nodes, self)
            for name in nodes:
                self.watchers.setdefault(name, []).append(found)
        return found

    @staticmethod
    def per_pod(ps: PodSet) -> dict[ResourceName, int]:
        out = {res: amount for res, amount in ps.requests.items() if amount > 0 and res != PODS}
        out[PODS] = _POD
        return out

    # admitted workloads ---------------------------------------------------------------------

    def _load(self, wl: Workload) -> None:
        """Take the capacity an admitted workload's topology assignments hold."""
        adm = wl.admission
        assert adm is not None
        self.loaded[wl.id] = adm
        held = self.held[wl.id] = []
        for psa in adm.pod_sets:
            ta = psa.topology
            if ta is None or not psa.count or not psa.flavors:
                continue
            view = self.view(next(iter(psa.flavors.values())))
            if view is None or view.levels != ta.levels:
                continue
            per_pod = {r: v // psa.count for r, v in psa.usage.items() if r != PODS}
            per_pod[PODS] = _POD
            for values, pods in ta.domains:
                names = view.nodes_of(values)
                left = pods
                for i, name in enumerate(names):
                    take = left if i == len(names) - 1 else min(left, self.fit(name, per_pod))
                    if take > 0:
                        self._take(name, per_pod, take)
                        held.append((name, per_pod, take))
                        left -= take
                    if not left:
                        break

    def release(self, ids: Iterable[WorkloadId]) -> None:
        """Give back what admitted workloads hold (a preemption simulation)."""
        for wid in ids:
            for name, per_pod, pods in self.held.get(wid, ()):
                self._take(name, per_pod, -pods)

    def restore(self, ids: Iterable[WorkloadId]) -> None:
        for wid in ids:
            for name, per_pod, pods in self.held.get(wid, ()):
                self._take(name, per_pod, pods)

    def holds(self, wid: WorkloadId) -> bool:
        return bool(self.held.get(wid))

    # placement ------------------------------------------------------------------------------

    def asks(
        self,
        wl: Workload,
        cq: ClusterQueue,
        flavors_by_pod_set: Sequence[Mapping[ResourceName, FlavorName]],
        counts: Sequence[int],
    ) -> list[Ask]:
        """The pod sets of `wl` that need a placement under the chosen flavors."""
        implied: bool | None = None
        out = []
        for i, ps in enumerate(wl.pod_sets):
            chosen = set(flavors_by_pod_set[i].values())
            if len(chosen) != 1:
                continue  # several flavors (or none): no single topology applies
            flavor = next(iter(chosen))
            view = self.view(flavor)
            if view is None:
                continue
            request = ps.topology
            if request is None:
                if implied is None:
                    assert self.snapshot is not None
                    implied = tas_only(cq, self.snapshot.flavors)
                if not implied:
                    continue
                request = _UNCONSTRAINED
            out.append(Ask(i, ps, flavor, counts[i], request))
        return out

    def place(self, asks: Sequence[Ask]) -> list[Placed] | Unplaced:
        """Place every ask, taking the capacity; or undo and say why the first that failed
        cannot be placed."""
        done: list[Placed] = []
        try:
            grouped: dict[str, list[Ask]] = {}
            for ask in asks:
                if ask.request.group is not None:
                    grouped.setdefault(ask.request.group, []).append(ask)
            for ask in asks:
                group = ask.request.group
                try:
                    if group is None or len(grouped[group]) == 1:
                        done.append(self._place_one(ask, None))
                    elif grouped[group][0] is ask:
                        done.extend(self._place_group(group, grouped[group]))
                except _UnplacedError as why:
                    why.index = ask.index
                    raise
        except _UnplacedError as why:
            self.undo(done)
            assert why.index is not None
            return Unplaced(why.index, str(why))
        return done

    def undo(self, placed: Iterable[Placed]) -> None:
        for p in placed:
            for name, pods in p.on_nodes:
                self._take(name, p.per_pod, -pods)

    def commit(self, placed: Iterable[Placed]) -> None:
        """Take the capacity of placements the cycle admits or reserves (until `end`)."""
        for p in placed:
            for name, pods in p.on_nodes:
                self._take(name, p.per_pod, pods)
            self.journal.append(p)

    def _setup(self, ask: Ask) -> tuple[_View, _Counts]:
        view = self.view(ask.flavor)
        assert view is not None
        return view, self._counts(view, ask.pod_set, self.per_pod(ask.pod_set))

    def _place_one(self, ask: Ask, within: Prefix | None) -> Placed:
        view, counts = self._setup(ask)
        request = ask.request
        if ask.count <= 0:
            return self._placed(ask, view, counts, [])
        if (
            request.mode is TopologyMode.UNCONSTRAINED
            and request.slice_level is None
            and within is None
        ):
            return self._placed(ask, view, counts, self._fullest_first(view, counts, ask))
        slice_depth, size = self._slicing(view, ask)
        units = ask.count // size
        caps = self._caps(view, counts, slice_depth, size)
        depth = (
            view.depth_of(request.level)
            if request.mode is not TopologyMode.UNCONSTRAINED
            else slice_depth
        )
        if within is not None:
            chosen: Prefix | None = within if caps.get(within, 0) >= units else None
        else:
            chosen = self._best_domain(view, caps, depth, units)
            if chosen is None and request.mode is not TopologyMode.REQUIRED:
                for up in range(depth - 1, -1, -1):
                    chosen = self._best_domain(view, caps, up, units)
                    if chosen is not None:
                        break
        if chosen is None:
            raise _UnplacedError(self._why(view, ask, caps, depth, units, size, slice_depth))
        on_nodes = self._descend(view, counts, caps, chosen, units, slice_depth, size)
        return self._placed(ask, view, counts, on_nodes)

    def _slicing(self, view: _View, ask: Ask) -> tuple[int, int]:
        request = ask.request
        size = request.slice_size or 1
        if request.slice_level is None or size <= 1:
            return view.depth + 1, 1  # units are pods everywhere
        if ask.count % size:
            raise _UnplacedError(
                f"pod set {ask.pod_set.name}: {ask.count} pods do not divide into slices of {size}"
            )
        return view.depth_of(request.slice_level), size

    def _caps(
        self, view: _View, counts: _Counts, slice_depth: int, size: int
    ) -> Mapping[Prefix, int]:
        """Room per domain in units: whole slices at and above the slice level, else pods."""
        if size == 1:
            return counts.sums
        caps: dict[Prefix, int] = dict(counts.sums)
        for prefix in view.by_depth[slice_depth]:
            caps[prefix] = counts.sums[prefix] // size
        for depth in range(slice_depth - 1, -1, -1):
            for prefix in view.by_depth[depth]:
                caps[prefix] = sum(caps[c] for c in view.children.get(prefix, ()))
        return caps

    @staticmethod
    def _best_domain(
        view: _View, caps: Mapping[Prefix, int], depth: int, units: int
    ) -> Prefix | None:
        best: Prefix | None = None
        best_cap = 0
        for prefix in view.by_depth[depth]:
            cap = caps[prefix]
            if cap < units:
                continue
            if best is None or cap < best_cap or (cap == best_cap and prefix < best):
                best, best_cap = prefix, cap
        return best

    def _descend(
        self,
        view: _View,
        counts: _Counts,
        caps: Mapping[Prefix, int],
        top: Prefix,
        units: int,
        slice_depth: int,
        size: int,
    ) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        stack = [(top, units)]
        while stack:
            prefix, u = stack.pop()
            depth = len(prefix)
            if depth == slice_depth:
                u *= size  # below the slice level, units are pods
            if depth == view.depth:
                names = view.nodes_of(prefix)
                out.extend(_pick(names, counts.fit, u))
                continue
            below = caps if depth + 1 <= slice_depth else counts.sums
            picked = _pick(view.children.get(prefix, []), below, u)
            stack.extend(reversed(picked))
        return out

    def _fullest_first(self, view: _View, counts: _Counts, ask: Ask) -> list[tuple[str, int]]:
        fit = counts.fit
        left = ask.count
        out = []
        for name in sorted((n for n in fit if fit[n] > 0), key=lambda n: (fit[n], n)):
            take = min(left, fit[name])
            out.append((name, take))
            left -= take
            if not left:
                return out
        total = ask.count - left
        raise _UnplacedError(
            f"pod set {ask.pod_set.name} needs {ask.count} pods on the nodes of topology "
            f"{view.topology} (flavor {view.flavor.name}); they have room for {total}"
        )

    def _placed(
        self, ask: Ask, view: _View, counts: _Counts, on_nodes: list[tuple[str, int]]
    ) -> Placed:
        per_pod = counts.per_pod
        by_domain: dict[Prefix, int] = {}
        for name, pods in on_nodes:
            leaf = view.prefixes[name][-1]
            by_domain[leaf] = by_domain.get(leaf, 0) + pods
            self._take(name, per_pod, pods)
        assignment = TopologyAssignment(view.levels, tuple(by_domain.items()))
        return Placed(ask.index, assignment, per_pod, on_nodes)

    def _why(
        self,
        view: _View,
        ask: Ask,
        caps: Mapping[Prefix, int],
        depth: int,
        units: int,
        size: int,
        slice_depth: int,
    ) -> str:
        request = ask.request
        what = f"{units} slices of {size} pods" if size > 1 else f"{ask.count} pods"
        if request.mode is TopologyMode.REQUIRED or depth == 0:
            if depth == 0:
                return (
                    f"pod set {ask.pod_set.name} needs {what} on the nodes of topology "
                    f"{view.topology}; they have room for {caps.get((), 0)}"
                )
            word = level_name(view.levels[depth - 1])
            domains = view.by_depth[depth]
            if not domains:
                return f"pod set {ask.pod_set.name} needs {what} in one {word}; none is free"
            largest = max(domains, key=lambda p: (caps[p], p))
            return (
                f"pod set {ask.pod_set.name} needs {what} in one {word}; the largest free "
                f"{word} ({largest[-1]}) holds {caps[largest]}"
                + (f" slices of {size}" if size > 1 else "")
                + f", {units - caps[largest]} short"
            )
        return (
            f"pod set {ask.pod_set.name} needs {what}; the nodes of topology {view.topology} "
            f"have room for {caps.get((), 0)}"
            + (f" slices of {size}" if size > 1 else "")
            + f", {units - caps.get((), 0)} short"
        )

    def _place_group(self, group: str, asks: list[Ask]) -> list[Placed]:
        """Pod sets that must share one domain (e.g. a leader and its workers) of the
        narrowest level any of them asks for (required if any requires it): the best-fit
        domain where all of them fit, one after the other."""
        view, _ = self._setup(asks[0])
        depth = max(
            (view.depth_of(a.request.level) for a in asks if a.request.level is not None),
            default=0,
        )
        strict = any(a.request.mode is TopologyMode.REQUIRED for a in asks)
        depths = [depth] if strict else range(depth, -1, -1)
        for d in depths:
            candidates = []
            for prefix in view.by_depth[d]:
                total = 0
                for ask in asks:
                    _, counts = self._setup(ask)
                    have = counts.sums.get(prefix, 0)
                    if have < ask.count:
                        break
                    total += have
                else:
                    candidates.append((total, prefix))
            for _, prefix in sorted(candidates):
                done: list[Placed] = []
                try:
                    for ask in asks:
                        done.append(self._place_one(ask, prefix))
                except _UnplacedError:
                    self.undo(done)
                    continue
                return done
        names = " + ".join(f"{a.count} ({a.pod_set.name})" for a in asks)
        word = level_name(view.levels[depth - 1]) if depth else "topology"
        raise _UnplacedError(
            f"pod set group {group} needs {names} pods in one {word}; none has room"
        )

    # preemption -----------------------------------------------------------------------------

    def find_room(
        self, asks: Sequence[Ask], candidates: Sequence[WorkloadId]
    ) -> tuple[list[WorkloadId], str] | None:
        """The fewest candidates (a prefix of their order, minimised) whose capacity, given
        back, lets every ask be placed, with the domain they free; None if none do. The
        capacity is unchanged on return."""
        holders = [c for c in candidates if self.holds(c)]
        if not holders:
            return None
        target = asks[0]
        view, _ = self._setup(target)
        request = target.request
        depth = (
            view.depth_of(request.level) if request.mode is not TopologyMode.UNCONSTRAINED else 0
        )
        best: tuple[int, Prefix, list[WorkloadId]] | None = None
        for prefix in view.by_depth[depth]:
            chosen = self._victims_in(view, prefix, asks, holders)
            if chosen is not None and (best is None or len(chosen) < best[0]):
                best = (len(chosen), prefix, chosen)
        if best is None:
            return None
        _, prefix, chosen = best
        where = (
            f"{level_name(view.levels[depth - 1])} {prefix[-1]}"
            if depth
            else f"topology {view.topology}"
        )
        return chosen, where

    def _victims_in(
        self, view: _View, prefix: Prefix, asks: Sequence[Ask], holders: list[WorkloadId]
    ) -> list[WorkloadId] | None:
        depth = len(prefix)
        inside = [
            c
            for c in holders
            if any(
                name in view.prefixes and view.prefixes[name][depth] == prefix
                for name, _, _ in self.held[c]
            )
        ]
        if not inside:
            return None
        taken: list[WorkloadId] = []
        ok = False
        for c in inside:
            self.release([c])
            taken.append(c)
            if self._fits_all(asks):
                ok = True
                break
        if not ok:
            self.restore(taken)
            return None
        kept = [taken[-1]]
        for c in reversed(taken[:-1]):
            self.restore([c])
            if self._fits_all(asks):
                continue
            self.release([c])
            kept.append(c)
        self.restore(kept)
        kept.reverse()
        return kept

    def _fits_all(self, asks: Sequence[Ask]) -> bool:
        placed = self.place(asks)
        if isinstance(placed, Unplaced):
            return False
        self.undo(placed)
        return True


def _pick(children: Sequence[K], caps: Mapping[K, int], units: int) -> list[tuple[K, int]]:
    """Best fit among children: the roomiest ones until the rest fits in one, then the
    smallest that holds the rest (ties by name)."""
    ordered = sorted((c for c in children if caps.get(c, 0) > 0), key=lambda c: -caps[c])
    out: list[tuple[K, int]] = []
    left = units
    for i, child in enumerate(ordered):
        if not left:
            break
        # The children from i on that hold the rest are a run at its start (largest first);
        # the last of the run is the smallest.
        last = None
        for other in ordered[i:]:
            if caps[other] < left:
                break
            last = other
        if last is not None:
            out.append((last, left))
            left = 0
            break
        out.append((child, caps[child]))
        left -= caps[child]
    if left:
        raise _UnplacedError(f"{units} do not fit (capacity changed while placing)")
    return out
