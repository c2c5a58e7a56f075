"""PURE fleet fair share: decayed usage per tenant, global queue and user, and Slurm's Fair
Tree factor.

The hub orders the work waiting for a cluster by priority first, then by this factor, then by
age (hub.placement.cycle, step 4). So among equals, the tenant and user who used the fleet
least, against their share, go first, as Slurm's multifactor priority with the fair-share
factor does (slurm.md "Fair share on that Slurm").

The model is Slurm's, three levels deep, the way Slurm nests sub-accounts in an account:
- an *association* is a (tenant, queue, user) triple; a tenant's shares are its
  `spec.fairSharingWeight` (Slurm's RawShares of an account); under it, each GlobalQueue its
  work goes through is a sub-account whose shares are that queue's `spec.fairSharingWeight`
  (the queue is the GlobalQueue the hub routes the workload by, hub.placement.routing; "" for
  work no GlobalQueue governs, with one share); every user under a queue has one share. With
  one queue per tenant the queue level changes nothing: its NormShares is 1 and the order of
  the users, hence their factors, are the two-level tree's;
- *usage* is billing-seconds: while a workload is bound to a cluster, its requests, weighted
  per resource (CPU cores by default, as Slurm's billing is), accrue every second. Usage decays
  with a half-life: `decayed(u, t) = u · 2^(−t / halfLife)`, Slurm's PriorityDecayHalfLife;
- **Fair Tree** (Slurm's default algorithm since 19.05), at each level of the tree:
  - `NormShares = shares / Σ siblings' shares`;
  - `EffectvUsage = usage / Σ siblings' usage`;
  - `LevelFS = NormShares / EffectvUsage` (∞ for no usage; 0 for no shares).
  Siblings are visited from the highest LevelFS down, depth first (tenant, then its queues,
  then their users). The users, in that order, get the factor `rank / n`: the first of n users
  gets 1.0, the last 1/n. Users with the same LevelFS under one queue share a rank (Slurm calls
  them tied). Shares of 0 (a tenant's or a queue's) mean LevelFS 0: last among siblings.

Everything here is arithmetic over plain data; `now` and the elapsed time are arguments.
Called by: hub.fairshare (the ledger that accrues usage and writes tenants' status),
hub.placement.cycle (through the factors it is given), tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from api.v1alpha1.federation import SUBMITTER_ANNOTATION, Tenant
from api.v1alpha1.workload import Workload
from hub.placement.routing import CLUSTER_SET_ANNOTATION, Route, Routing

__all__ = [
    "NO_QUEUE",
    "NO_TENANT",
    "Association",
    "FairShareOrder",
    "FairTree",
    "LevelRow",
    "accrue",
    "association_of",
    "billing",
    "decay",
    "fair_tree",
    "queue_of",
    "tenant_default_queue",
]

NO_TENANT = ""
"""The tenant of work in a namespace no Tenant owns: one share, like any tenant."""


NO_QUEUE = ""
"""The queue of work no GlobalQueue governs (and of usage stored before queues were kept, until
the ledger moves it to its tenant's default queue): one share, like any queue."""


@dataclass(frozen=True, slots=True, order=True)
class Association:
    tenant: str
    user: str
    queue: str = NO_QUEUE
    """The GlobalQueue the work went through (NO_QUEUE: none)."""


def decay(
    usage: Mapping[Association, float], elapsed_seconds: float, half_life_seconds: float
) -> dict[Association, float]:
    """Every usage decayed over `elapsed_seconds` (none when the half-life is 0: no decay)."""
    if half_life_seconds <= 0 or elapsed_seconds <= 0:
        return dict(usage)
    factor = 0.5 ** (elapsed_seconds / half_life_seconds)
    return {a: u * factor for a, u in usage.items()}


def billing(requests_milli: Mapping[str, int], weights: Mapping[str, float]) -> float:
    """Billing units per second of a workload's requests (milli-units), e.g. CPU cores."""
    return sum(
        weights.get(resource, 0.0) * amount / 1000 for resource, amount in requests_milli.items()
    )


def accrue(
    usage: Mapping[Association, float],
    running: Iterable[tuple[Association, float]],
    elapsed_seconds: float,
) -> dict[Association, float]:
    """Usage after `elapsed_seconds` of these workloads running (association, billing/s)."""
    grown = dict(usage)
    if elapsed_seconds <= 0:
        return grown
    for association, rate in running:
        grown[association] = grown.get(association, 0.0) + rate * elapsed_seconds
    return grown


@dataclass(frozen=True, slots=True)
class LevelRow:
    """One node of the tree as `sshare -l` shows it (a tenant, a queue under it, or a user
    under that)."""

    name: str
    raw_shares: float
    norm_shares: float
    raw_usage: float
    effective_usage: float
    level_fs: float
    factor: float | None = None
    """Users only: the fair-share factor in [0, 1]."""


@dataclass(frozen=True, slots=True)
class FairTree:
    factors: Mapping[Association, float]
    tenants: tuple[LevelRow, ...]
    """Tenants in the order visited, highest LevelFS first."""
    queues: Mapping[str, tuple[LevelRow, ...]]
    """Per tenant, its queues in the order visited."""
    users: Mapping[tuple[str, str], tuple[LevelRow, ...]]
    """Per (tenant, queue), its users in the order visited."""

    def factor(self, association: Association) -> float:
        """A factor for any association; one the tree has not seen has no usage: the most."""
        return self.factors.get(association, 1.0)


def _level(
    shares: Mapping[str, float], usage: Mapping[str, float]
) -> list[tuple[str, float, float, float]]:
    """(name, normShares, effectiveUsage, levelFS) of siblings, highest LevelFS first (ties
    by name, so the order is stable)."""
    total_shares = sum(shares.values())
    total_usage = sum(usage.get(name, 0.0) for name in shares)
    rows = []
    for name, share in shares.items():
        norm = share / total_shares if total_shares > 0 else 0.0
        effective = usage.get(name, 0.0) / total_usage if total_usage > 0 else 0.0
        if norm == 0:
            level = 0.0
        elif effective == 0:
            level = math.inf
        else:
            level = norm / effective
        rows.append((name, norm, effective, level))
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows


def fair_tree(
    tenant_shares: Mapping[str, float],
    users: Mapping[str, Iterable[str]],
    usage: Mapping[Association, float],
    *,
    queue_shares: Mapping[str, float] | None = None,
    default_queue: Mapping[str, str] | None = None,
    waiting: Iterable[Association] = (),
) -> FairTree:
    """The Fair Tree over these tenants (shares), their queues (`queue_shares` by GlobalQueue
    name; a queue not named there, NO_QUEUE included, has one share), their users, and usage
    per association.

    A listed user of a tenant (`users`) with no association in it yet is placed under the
    tenant's default queue (`default_queue`, else NO_QUEUE); `waiting` are associations with
    waiting work, placed where they are. Associations whose tenant is unknown are under
    NO_TENANT with one share, so no work is left without a factor."""
    queue_weights = queue_shares or {}
    defaults = default_queue or {}
    members: dict[str, dict[str, set[str]]] = {t: {} for t in tenant_shares}
    for association in (*usage, *waiting):
        queues = members.setdefault(association.tenant, {})
        queues.setdefault(association.queue, set()).add(association.user)
    for tenant, listed in users.items():
        queues = members.setdefault(tenant, {})
        placed = {u for us in queues.values() for u in us}
        for user in listed:
            if user not in placed:
                queues.setdefault(defaults.get(tenant, NO_QUEUE), set()).add(user)
    shares = dict(tenant_shares)
    for tenant in members:
        shares.setdefault(tenant, 1.0)
    tenant_usage: dict[str, float] = {}
    queue_usage: dict[tuple[str, str], float] = {}
    for association, used in usage.items():
        tenant_usage[association.tenant] = tenant_usage.get(association.tenant, 0.0) + used
        node = (association.tenant, association.queue)
        queue_usage[node] = queue_usage.get(node, 0.0) + used
    n = sum(len(us) for queues in members.values() for us in queues.values())
    order: list[list[Association]] = []  # groups of tied users, best first
    tenant_rows: list[LevelRow] = []
    queue_rows: dict[str, tuple[LevelRow, ...]] = {}
    user_rows: dict[tuple[str, str], tuple[LevelRow, ...]] = {}
    for tenant, norm, effective, level in _level(shares, tenant_usage):
        tenant_rows.append(
            LevelRow(tenant, shares[tenant], norm, tenant_usage.get(tenant, 0.0), effective, level)
        )
        queues = members[tenant]
        mine_queues = {q: queue_usage.get((tenant, q), 0.0) for q in queues}
        raw_queue_shares = {q: float(queue_weights.get(q, 1.0)) for q in queues}
        ranked_queues = _level(raw_queue_shares, mine_queues)
        queue_rows[tenant] = tuple(
            LevelRow(queue, raw_queue_shares[queue], qnorm, mine_queues[queue], qeff, qlevel)
            for queue, qnorm, qeff, qlevel in ranked_queues
        )
        for queue, _, _, _ in ranked_queues:
            mine = {u: usage.get(Association(tenant, u, queue), 0.0) for u in queues[queue]}
            ranked = _level(dict.fromkeys(queues[queue], 1.0), mine)
            previous: float | None = None
            for user, _, _, user_level in ranked:
                if previous is None or user_level != previous:
                    order.append([])
                order[-1].append(Association(tenant, user, queue))
                previous = user_level
            user_rows[(tenant, queue)] = tuple(
                LevelRow(user, 1.0, unorm, mine[user], ueff, ulevel)
                for user, unorm, ueff, ulevel in ranked
            )
    factors: dict[Association, float] = {}
    rank = n
    for tied in order:
        for association in tied:
            factors[association] = rank / n if n else 1.0
        rank -= len(tied)
    users_with_factors = {
        (tenant, queue): tuple(
            LevelRow(
                r.name,
                r.raw_shares,
                r.norm_shares,
                r.raw_usage,
                r.effective_usage,
                r.level_fs,
                factors[Association(tenant, r.name, queue)],
            )
            for r in rows
        )
        for (tenant, queue), rows in user_rows.items()
    }
    return FairTree(factors, tuple(tenant_rows), queue_rows, users_with_factors)


@dataclass
class FairShareOrder:
    """What the dispatch cycle needs to order waiting work: the tree and which tenant owns
    which namespace (the queue of a workload is its route under the cycle's routing)."""

    tree: FairTree
    tenant_of: Mapping[str, str]
    _memo: dict[tuple[str | None, str, str | None, str | None], float] = field(default_factory=dict)
    """Factors by (namespace, local queue, cluster set asked, submitter): what decides the
    association; a deep queue's sort looks each up once."""
    _memo_routing: Routing | None = None
    """The routing the memo was filled under: a new configuration starts it over."""

    def association(self, wl: Workload, routing: Routing | None = None) -> Association:
        return association_of(wl, self.tenant_of, routing)

    def factor(self, wl: Workload, routing: Routing | None = None) -> float:
        if routing is not self._memo_routing:
            self._memo.clear()
            self._memo_routing = routing
        meta = wl.metadata
        annotations = meta.annotations
        key = (
            meta.namespace,
            wl.spec.queue_name,
            annotations.get(CLUSTER_SET_ANNOTATION),
            annotations.get(SUBMITTER_ANNOTATION),
        )
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.tree.factor(association_of(wl, self.tenant_of, routing))
        return found


def queue_of(wl: Workload, routing: Routing | None) -> str:
    """The GlobalQueue the hub routes a workload by (NO_QUEUE: none, or no routing given)."""
    if routing is None:
        return NO_QUEUE
    route = routing.route_of(wl)
    if isinstance(route, Route) and route.global_queue is not None:
        return route.global_queue.name
    return NO_QUEUE


def association_of(
    wl: Workload, tenant_of: Mapping[str, str], routing: Routing | None = None
) -> Association:
    """A workload's (tenant, queue, user): the tenant owning its namespace, the GlobalQueue
    it is routed by, the user who submitted it (the hub's annotation; "" when it was not
    submitted through the hub)."""
    meta = wl.metadata
    return Association(
        tenant_of.get(meta.namespace or "default", NO_TENANT),
        meta.annotations.get(SUBMITTER_ANNOTATION, ""),
        queue_of(wl, routing),
    )


def tenant_default_queue(tenant: Tenant, routing: Routing) -> str:
    """The queue a tenant's work goes through when there is one to tell: the GlobalQueue the
    routing gives its LocalQueues (the first by name when they differ), else the first
    GlobalQueue open to every cluster queue that admits the tenant, else NO_QUEUE. Usage stored
    before queues were kept is moved there, and listed users with no work yet sit there."""
    namespaces = set(tenant.spec.namespaces)
    routed: set[str] = set()
    for lq in routing.local_queues.values():
        if lq.metadata.namespace not in namespaces:
            continue
        gq = routing.governing_queue(lq.spec.cluster_queue, {tenant.name})
        if gq is not None:
            routed.add(gq.name)
    if routed:
        return min(routed)
    for gq in routing.global_queues:
        if not gq.spec.cluster_queues and (not gq.spec.tenants or tenant.name in gq.spec.tenants):
            return gq.name
    return NO_QUEUE
