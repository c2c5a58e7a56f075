"""PURE placement: choose the member clusters to offer a workload to.

`place(snapshot clusters, request, now)` filters the clusters of the workload's cluster set
(connected, not cordoned, matching required cluster affinity, serving its cluster queue, not
already tried), scores the survivors by preferred affinity and then by how much headroom is
left for the workload's requests in the best flavor of its cluster queue, and applies the
dispatch policy (BestFit: the single best; AllAtOnce: every cluster with room; Incremental:
`stepSize` more every `interval`). Clusters with no room now are not offered: the workload
waits at the hub, where fleet-wide ordering still applies, instead of queueing blind in one
cluster — unless its cluster queue takes back lent quota from any borrower and some cluster
holds it within the queue's unused nominal quota (`reclaim_score`): then it is offered to the
one such cluster where the most is left, whatever the dispatch mode, and that cluster's
engine preempts the borrowers; failing that, to one cluster where lower-priority workloads of
its queue hold the room (`preempt_score`, when the queue preempts its own lower
priorities). A pod set that requires one domain of a topology level also needs such a
domain free in the cluster (hub.placement.topology): a cluster where one could only ever fit
is waited for, one where none could is ruled out. No I/O, no clock: `now` is an argument.

Called by: the hub's dispatch loop (one call per pending workload per cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from api.k8s.core import LabelSelectorRequirement
from hub.placement.plan import ClusterVerdict, Placement, Verdict
from hub.placement.snapshot import (
    ClusterName,
    ClusterView,
    DispatchMode,
    FlavorHeadroom,
    PlacementRequest,
    QueueView,
)
from hub.placement.topology import Fit, judge

__all__ = ["headroom_score", "place"]

_SCALE = 1_000_000  # headroom scores are parts per million of the flavor's capacity


def _matches_term(labels: Mapping[str, str], term: Iterable[LabelSelectorRequirement]) -> bool:
    as_dict = dict(labels)
    return all(req.matches(as_dict) for req in term)


def headroom_score(queue: QueueView, requests: Mapping[str, int]) -> tuple[int, str] | None:
    """The best flavor's leftover share for this workload, or None when nothing fits now.

    For each flavor that has every requested resource, the score is the smallest fraction
    (in ppm) of that flavor's capacity left free after admitting the workload — the
    dominant leftover. Flavors are tried in the queue's order; the best score wins, ties keep
    the queue's preference.
    """
    best: tuple[int, str] | None = None
    for flavor in queue.flavors:
        leftover = _SCALE
        fits = True
        for resource, amount in requests.items():
            if amount == 0:
                continue
            free = flavor.headroom.get(resource)
            cap = flavor.capacity.get(resource, 0)
            if free is None or free < amount:
                fits = False
                break
            share = (free - amount) * _SCALE // cap if cap > 0 else 0
            leftover = min(leftover, share)
        if fits and (best is None or leftover > best[0]):
            best = (leftover, flavor.flavor)
    return best


def _best_by_preemption(
    queue: QueueView,
    requests: Mapping[str, int],
    room_of: Callable[[FlavorHeadroom], Mapping[str, int] | None],
) -> tuple[int, str] | None:
    """The best flavor whose room by preemption (`room_of`, per resource; None: none in that
    flavor) holds the workload, scored as `headroom_score`."""
    best: tuple[int, str] | None = None
    for flavor in queue.flavors:
        room = room_of(flavor)
        if room is None:
            continue
        leftover = _SCALE
        fits = True
        for resource, amount in requests.items():
            if amount == 0:
                continue
            free = room.get(resource, 0)
            cap = flavor.capacity.get(resource, 0)
            if free < amount:
                fits = False
                break
            leftover = min(leftover, (free - amount) * _SCALE // cap if cap > 0 else 0)
        if fits and (best is None or leftover > best[0]):
            best = (leftover, flavor.flavor)
    return best


def reclaim_score(queue: QueueView, requests: Mapping[str, int]) -> tuple[int, str] | None:
    """Where the queue may take back quota it lent to its cohort (preempting borrowers
    there), the best flavor that holds the workload within its unused nominal quota, scored
    as `headroom_score`; None when the queue does not reclaim or no flavor holds it."""
    if not queue.reclaims:
        return None

    def lent(flavor: FlavorHeadroom) -> Mapping[str, int]:
        resources = flavor.reclaimable.keys() | flavor.headroom.keys()
        return {r: max(flavor.reclaimable.get(r, 0), flavor.headroom.get(r, 0)) for r in resources}

    return _best_by_preemption(queue, requests, lent)


def preempt_score(
    queue: QueueView, requests: Mapping[str, int], lower: Mapping[str, Mapping[str, int]]
) -> tuple[int, str] | None:
    """The best flavor where the workload fits in what is free plus what lower-priority
    workloads of its queue hold (`lower`, per flavor), scored as `headroom_score`; None when
    no flavor holds it so."""

    def freed(flavor: FlavorHeadroom) -> Mapping[str, int] | None:
        held = lower.get(flavor.flavor)
        if not held:
            return None
        resources = held.keys() | flavor.headroom.keys()
        return {r: flavor.headroom.get(r, 0) + held.get(r, 0) for r in resources}

    return _best_by_preemption(queue, requests, freed)


def _ever_fits(queue: QueueView, requests: Mapping[str, int]) -> bool:
    """Whether some flavor of the queue could hold the workload when empty. (Loops, not
    nested generators: it runs for every cluster without room, every cycle.)"""
    wanted = [(resource, amount) for resource, amount in requests.items() if amount]
    for flavor in queue.flavors:
        capacity = flavor.capacity
        if all(amount <= capacity.get(resource, 0) for resource, amount in wanted):
            return True
    return False


def _describe(requests: Mapping[str, int]) -> str:
    def show(milli: int) -> str:
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"

    return ", ".join(f"{r}={show(v)}" for r, v in sorted(requests.items()) if v)


# A cluster that did not answer an offer in time is skipped for this long, then tried again:
# an agent can be slow for a while (a burst, a restart), and when it is the only cluster that
# can run the workload, skipping it for good would strand the workload at the hub.
TIMEOUT_RETRY_SECONDS = 60.0


def _screen(
    cluster: ClusterView, request: PlacementRequest, now: datetime
) -> ClusterVerdict | None:
    """The first filter a cluster fails, or None when it may be scored."""
    name = cluster.name
    if name not in request.cluster_set:
        return ClusterVerdict(name, Verdict.NOT_IN_CLUSTER_SET, "not in the workload's cluster set")
    if not cluster.connected:
        return ClusterVerdict(name, Verdict.DISCONNECTED, "its agent is not connected")
    if not cluster.reported:
        return ClusterVerdict(
            name, Verdict.AWAITING_CAPACITY, "connected, its capacity not reported yet"
        )
    if cluster.cordoned:
        return ClusterVerdict(name, Verdict.CORDONED, "cordoned by an admin")
    if request.required_terms and not any(
        _matches_term(cluster.labels, term) for term in request.required_terms
    ):
        return ClusterVerdict(
            name, Verdict.AFFINITY_MISMATCH, "labels match no required cluster affinity term"
        )
    for offer in request.offers:
        if offer.cluster != name:
            continue
        if offer.outcome == "rejected":
            detail = f": {offer.reason}" if offer.reason else ""
            return ClusterVerdict(name, Verdict.REJECTED, f"rejected the offer{detail}")
        if offer.outcome == "timeout":
            if (now - offer.offered_at).total_seconds() >= TIMEOUT_RETRY_SECONDS:
                continue
            return ClusterVerdict(name, Verdict.TIMED_OUT, "did not answer the offer in time")
        return ClusterVerdict(name, Verdict.OFFERED, "offer pending")
    if request.cluster_queue not in cluster.queues:
        return ClusterVerdict(
            name, Verdict.NO_SUCH_QUEUE, f"has no cluster queue {request.cluster_queue!r}"
        )
    return None


def place(clusters: Iterable[ClusterView], request: PlacementRequest, now: datetime) -> Placement:
    """Decide where to offer `request` now. Pure: same inputs, same answer."""
    verdicts: list[ClusterVerdict] = []
    scored: list[ClusterVerdict] = []
    reclaiming: list[ClusterVerdict] = []
    """Full now, but its queue may take back lent quota there: offered only if none fits."""
    open_offers = [o for o in request.offers if o.outcome is None]
    described = ""  # the requests in words, written once per call when a verdict needs them
    for cluster in sorted(clusters, key=lambda c: c.name):
        screened = _screen(cluster, request, now)
        if screened is not None:
            verdicts.append(screened)
            continue
        queue = cluster.queues[request.cluster_queue]
        topology = (
            judge(cluster.topologies, [f.flavor for f in queue.flavors], request.topology)
            if request.topology
            else None
        )
        if topology is not None and topology.fit is Fit.NEVER:
            verdicts.append(ClusterVerdict(cluster.name, Verdict.NO_DOMAIN, topology.message))
            continue
        fit = headroom_score(queue, request.requests)
        if fit is None and request.min_requests is not None:
            fit = headroom_score(queue, request.min_requests)
        if fit is None and (topology is None or topology.fit is not Fit.LATER):
            taken_back = reclaim_score(queue, request.requests)
            if taken_back is not None:
                reclaiming.append(
                    ClusterVerdict(
                        cluster.name,
                        Verdict.RECLAIM,
                        f"no free quota in {request.cluster_queue!r} now, but it may take back "
                        f"quota it lent to its cohort in flavor {taken_back[1]!r} by "
                        "preempting borrowers",
                        (-1, taken_back[0]),
                    )
                )
                continue
            lower = request.preemptible.get(cluster.name)
            freed = preempt_score(queue, request.requests, lower) if lower else None
            if freed is not None:
                reclaiming.append(
                    ClusterVerdict(
                        cluster.name,
                        Verdict.PREEMPT,
                        f"no free quota in {request.cluster_queue!r} now, but lower-priority "
                        f"workloads of it hold enough in flavor {freed[1]!r} to preempt",
                        (-2, freed[0]),
                    )
                )
                continue
        if fit is None:
            described = described or _describe(request.requests)
            if _ever_fits(queue, request.min_requests or request.requests):
                verdict = ClusterVerdict(
                    cluster.name,
                    Verdict.INSUFFICIENT_HEADROOM,
                    f"not enough free quota in {request.cluster_queue!r} for {described} right now",
                )
            else:
                verdict = ClusterVerdict(
                    cluster.name,
                    Verdict.NEVER_FITS,
                    f"{described} exceeds every flavor of "
                    f"{request.cluster_queue!r} even when empty",
                )
            verdicts.append(verdict)
            continue
        if topology is not None and topology.fit is Fit.LATER:
            verdicts.append(ClusterVerdict(cluster.name, Verdict.NO_FREE_DOMAIN, topology.message))
            continue
        affinity = sum(
            t.weight
            for t in request.preferred_terms
            if _matches_term(cluster.labels, t.match_expressions)
        )
        scored.append(
            ClusterVerdict(
                cluster.name,
                Verdict.CANDIDATE,
                f"fits in flavor {fit[1]!r} with {fit[0] / 10_000:.1f}% of it left"
                + (f"; {topology.message}" if topology is not None else ""),
                (affinity, fit[0]),
            )
        )
    scored.sort(key=lambda v: (-v.score[0], -v.score[1], v.cluster))
    # Taking back lent quota before preempting the queue's own lower priorities.
    reclaiming.sort(key=lambda v: (-v.score[0], -v.score[1], v.cluster))
    if not scored and not open_offers and reclaiming:
        # No cluster has room, but the workload's queue lent quota it may take back: offer it
        # to one such cluster alone, whatever the dispatch mode, so it preempts in one
        # cluster only (its agent queues it and preempts the borrowers there).
        scored = reclaiming[:1]
        reclaiming = reclaiming[1:]
    verdicts = reclaiming + verdicts
    if not scored and not open_offers:
        only = _only_cluster(verdicts)
        if only is not None:
            # Holding it at the hub gains nothing when no other cluster could ever take it:
            # queue it there, where the cluster's own admission can order and preempt for it.
            verdicts.remove(only)
            until = (
                f"until it fits there ({only.message})"
                if only.verdict is Verdict.NO_FREE_DOMAIN
                else "until its quota frees"
            )
            scored = [
                ClusterVerdict(
                    only.cluster,
                    Verdict.ONLY_CLUSTER,
                    f"the only cluster that can run it: queued in {request.cluster_queue!r} "
                    + until,
                )
            ]
    verdicts = scored + verdicts
    chosen = _apply_policy(request, scored, open_offers_count=len(open_offers), now=now)
    retry = None
    if request.mode == DispatchMode.INCREMENTAL and scored and not chosen:
        retry = _seconds_until_next_step(request, now)
    waiting = ""
    if not chosen:
        waiting = _waiting_reason(request, verdicts, open_offers_count=len(open_offers))
    return Placement(request.workload, tuple(chosen), tuple(verdicts), waiting, retry)


# Verdicts that rule a cluster out for this workload for good (until the fleet changes).
_RULED_OUT = frozenset(
    {
        Verdict.NOT_IN_CLUSTER_SET,
        Verdict.AFFINITY_MISMATCH,
        Verdict.NO_SUCH_QUEUE,
        Verdict.NEVER_FITS,
        Verdict.NO_DOMAIN,
        Verdict.REJECTED,
        Verdict.TIMED_OUT,
    }
)
# Verdicts that say why in words of the cluster's topology: the waiting reason names them.
_TOPOLOGY = frozenset({Verdict.NO_FREE_DOMAIN, Verdict.NO_DOMAIN})


def _only_cluster(verdicts: list[ClusterVerdict]) -> ClusterVerdict | None:
    """The one cluster that lacks room only for now, when every other is ruled out (a
    disconnected or cordoned cluster may come back, so it still counts as a chance)."""
    possible = [v for v in verdicts if v.verdict not in _RULED_OUT]
    if len(possible) == 1 and possible[0].verdict in (
        Verdict.INSUFFICIENT_HEADROOM,
        Verdict.NO_FREE_DOMAIN,
    ):
        return possible[0]
    return None


def _apply_policy(
    request: PlacementRequest,
    scored: list[ClusterVerdict],
    *,
    open_offers_count: int,
    now: datetime,
) -> list[ClusterName]:
    candidates = [v.cluster for v in scored]
    if request.mode == DispatchMode.ALL_AT_ONCE:
        return candidates
    if request.mode == DispatchMode.INCREMENTAL:
        if open_offers_count and _seconds_until_next_step(request, now) > 0:
            return []
        return candidates[: max(1, request.step_size)]
    # BestFit: one offer at a time.
    if open_offers_count:
        return []
    return candidates[:1]


def _seconds_until_next_step(request: PlacementRequest, now: datetime) -> int:
    open_times = [o.offered_at for o in request.offers if o.outcome is None]
    if not open_times:
        return 0
    elapsed = (now - max(open_times)).total_seconds()
    return max(0, int(request.interval_seconds - elapsed + 0.999))


def _waiting_reason(
    request: PlacementRequest, verdicts: list[ClusterVerdict], *, open_offers_count: int
) -> str:
    if open_offers_count:
        return "waiting for the clusters it was offered to"
    if not verdicts:
        return "the cluster set has no clusters"
    if any(v.verdict in _TOPOLOGY for v in verdicts):
        # Per cluster, in words: "sim-0: no free rack holds 16 pods (largest 11); …"
        said = [v for v in verdicts if v.verdict is not Verdict.NOT_IN_CLUSTER_SET]
        never = all(v.verdict in _RULED_OUT for v in said)
        head = "no cluster could ever take it" if never else "no cluster can take it now"
        return f"{head} — " + "; ".join(f"{v.cluster}: {v.message}" for v in said)
    if all(
        v.verdict is Verdict.NEVER_FITS
        for v in verdicts
        if v.verdict is not Verdict.NOT_IN_CLUSTER_SET
    ) and any(v.verdict is Verdict.NEVER_FITS for v in verdicts):
        return "too large for every cluster of its cluster set"
    counts: dict[Verdict, int] = {}
    for v in verdicts:
        if v.verdict is not Verdict.NOT_IN_CLUSTER_SET:
            counts[v.verdict] = counts.get(v.verdict, 0) + 1
    if not counts:
        return "no cluster of its cluster set is known to the hub"
    parts = [f"{n} {verdict.value}" for verdict, n in sorted(counts.items())]
    return "no cluster can take it now: " + ", ".join(parts)
