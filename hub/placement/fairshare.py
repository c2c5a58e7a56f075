"""PURE fleet fair share: decayed usage per tenant and user, and Slurm's Fair Tree factor.

The hub orders the work waiting for a cluster by priority first, then by this factor, then by
age (hub.placement.cycle, step 4). So among equals, the tenant and user who used the fleet
least, against their share, go first, as Slurm's multifactor priority with the fair-share
factor does (slurm.md "Fair share on that Slurm").

The model is Slurm's, two levels deep:
- an *association* is a (tenant, user) pair; a tenant's shares are its
  `spec.fairSharingWeight` (Slurm's RawShares of an account), and every user of a tenant has
  one share;
- *usage* is billing-seconds: while a workload is bound to a cluster, its requests, weighted
  per resource (CPU cores by default, as Slurm's billing is), accrue every second. Usage decays
  with a half-life: `decayed(u, t) = u · 2^(−t / halfLife)`, Slurm's PriorityDecayHalfLife;
- **Fair Tree** (Slurm's default algorithm since 19.05), at each level of the tree:
  - `NormShares = shares / Σ siblings' shares`;
  - `EffectvUsage = usage / Σ siblings' usage`;
  - `LevelFS = NormShares / EffectvUsage` (∞ for no usage; 0 for no shares).
  Siblings are visited from the highest LevelFS down, depth first. The users, in that order,
  get the factor `rank / n`: the first of n users gets 1.0, the last 1/n. Users with the same
  LevelFS under one tenant share a rank (Slurm calls them tied).

Everything here is arithmetic over plain data; `now` and the elapsed time are arguments.
Called by: hub.fairshare (the ledger that accrues usage and writes tenants' status),
hub.placement.cycle (through the factors it is given), tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from api.v1alpha1.federation import SUBMITTER_ANNOTATION
from api.v1alpha1.workload import Workload

__all__ = [
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
]

NO_TENANT = ""
"""The tenant of work in a namespace no Tenant owns: one share, like any tenant."""


@dataclass(frozen=True, slots=True, order=True)
class Association:
    tenant: str
    user: str


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
    """One node of the tree as `sshare -l` shows it (a tenant, or a user under it)."""

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
    users: Mapping[str, tuple[LevelRow, ...]]
    """Per tenant, its users in the order visited."""

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
) -> FairTree:
    """The Fair Tree over these tenants (shares), their users, and usage per association.
    Associations with usage or listed users whose tenant is unknown are under NO_TENANT with
    one share, so no work is left without a factor."""
    members: dict[str, set[str]] = {t: set(us) for t, us in users.items()}
    shares = dict(tenant_shares)
    for association in usage:
        members.setdefault(association.tenant, set()).add(association.user)
    for tenant in members:
        shares.setdefault(tenant, 1.0)
    for tenant in shares:
        members.setdefault(tenant, set())
    tenant_usage: dict[str, float] = {}
    for association, used in usage.items():
        tenant_usage[association.tenant] = tenant_usage.get(association.tenant, 0.0) + used
    n = sum(len(us) for us in members.values())
    order: list[list[Association]] = []  # groups of tied users, best first
    tenant_rows: list[LevelRow] = []
    user_rows: dict[str, tuple[LevelRow, ...]] = {}
    for tenant, norm, effective, level in _level(shares, tenant_usage):
        tenant_rows.append(
            LevelRow(tenant, shares[tenant], norm, tenant_usage.get(tenant, 0.0), effective, level)
        )
        mine = {u: usage.get(Association(tenant, u), 0.0) for u in members[tenant]}
        ranked = _level(dict.fromkeys(members[tenant], 1.0), mine)
        previous: float | None = None
        for user, _, _, user_level in ranked:
            if previous is None or user_level != previous:
                order.append([])
            order[-1].append(Association(tenant, user))
            previous = user_level
        user_rows[tenant] = tuple(
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
        tenant: tuple(
            LevelRow(
                r.name,
                r.raw_shares,
                r.norm_shares,
                r.raw_usage,
                r.effective_usage,
                r.level_fs,
                factors[Association(tenant, r.name)],
            )
            for r in rows
        )
        for tenant, rows in user_rows.items()
    }
    return FairTree(factors, tuple(tenant_rows), users_with_factors)


@dataclass(frozen=True, slots=True)
class FairShareOrder:
    """What the dispatch cycle needs to order waiting work: the tree and which tenant owns
    which namespace."""

    tree: FairTree
    tenant_of: Mapping[str, str]
    _memo: dict[tuple[str | None, str | None], float] = field(default_factory=dict)
    """Factors by (namespace, submitter): a deep queue's sort looks each up once."""

    def association(self, wl: Workload) -> Association:
        return association_of(wl, self.tenant_of)

    def factor(self, wl: Workload) -> float:
        meta = wl.metadata
        key = (meta.namespace, meta.annotations.get(SUBMITTER_ANNOTATION))
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.tree.factor(association_of(wl, self.tenant_of))
        return found


def association_of(wl: Workload, tenant_of: Mapping[str, str]) -> Association:
    """A workload's (tenant, user): the tenant owning its namespace, the user who submitted it
    (the hub's annotation; "" when it was not submitted through the hub)."""
    meta = wl.metadata
    return Association(
        tenant_of.get(meta.namespace or "default", NO_TENANT),
        meta.annotations.get(SUBMITTER_ANNOTATION, ""),
    )
