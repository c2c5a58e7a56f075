"""The fleet's fair-share ledger: usage per (tenant, global queue, user), decayed and accrued
every calc period, kept in the store, turned into Fair Tree factors for the dispatch cycle and
shown in each Tenant's status (`qctl get tenants`, like `sshare`).

A workload is charged for the time it is bound to a cluster and not finished: the ledger
hears every change of the hub's mirror (HubState.on_workload) and notes when each workload
became bound and when it stopped (finished, given back, deleted). So a job shorter than a
period is charged for exactly its run, as Slurm charges a job's run time.

Every `fair_share_calc_period_seconds` the leader:
1. decays the usage it holds over the time since the last update (its half-life);
2. adds each workload's billing rate (its requests, weighted per resource) times the part of
   its bound time that falls in this period; a workload found bound that it never saw
   become bound (the term began since) is charged from the last update;
3. writes the usage to the store (`/fairshare/usage`), so a restart or a new leader carries
   on from it, computes the tree (hub.placement.fairshare) over the Tenants, the GlobalQueues
   their work goes through (weighted by each queue's fairSharingWeight), their listed users
   and every association with usage or waiting work, and gives the dispatcher the factors it
   orders waiting work by;
4. writes each Tenant's status where it changed.

A workload's queue is the GlobalQueue the dispatcher's routing gives it. Usage stored before
queues were kept (rows with a tenant and a user only) is read as the tenant's default queue
(hub.placement.fairshare.tenant_default_queue) at the first update after loading it: the
tenant's and the user's usage stay whole.

One ledger per leadership term (hub.leader starts it with the dispatcher). Called by:
hub.leader; tests drive `update` with their own clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from api.v1alpha1.federation import GlobalQueue, Tenant, TenantFairShare
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.dispatch import Dispatcher
from hub.errors import HubError
from hub.objects import ObjectRepository
from hub.placement.fairshare import (
    NO_QUEUE,
    Association,
    FairShareOrder,
    FairTree,
    LevelRow,
    accrue,
    association_of,
    billing,
    decay,
    fair_tree,
    tenant_default_queue,
)
from hub.placement.routing import workload_requests
from hub.settings import HubSettings
from hub.state import HubState
from hub.store import base as store_base

__all__ = ["USAGE_KEY", "FairShareLedger"]

log = logging.getLogger(__name__)

USAGE_KEY = "/fairshare/usage"


def _now() -> datetime:
    return datetime.now(UTC)


class FairShareLedger:
    def __init__(
        self,
        state: HubState,
        dispatcher: Dispatcher,
        repo: ObjectRepository,
        settings: HubSettings,
        *,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.state = state
        self.dispatcher = dispatcher
        self.repo = repo
        self.half_life = settings.fair_share_half_life_seconds
        self.period = settings.fair_share_calc_period_seconds
        self.weights = dict(settings.fair_share_resource_weights)
        self.clock = clock
        self.usage: dict[Association, float] = {}
        # Stored before queues were kept: (tenant, user) → usage, for the tenant's default
        # queue once the next update knows the configuration.
        self._unqueued: dict[Association, float] = {}
        self.updated_at: datetime | None = None
        self.loaded = False
        # Bound and not finished: since when (charged up to the last update at most).
        self._open: dict[str, tuple[Association, float, datetime]] = {}
        # Stopped since the last update: (association, rate, from, to).
        self._closed: list[tuple[Association, float, datetime, datetime]] = []
        self._tenant_of: dict[str, str] = {}
        state.on_workload.append(self._observe)

    def _observe(self, key: str, old: Workload | None, new: Workload | None) -> None:
        """A mirrored workload changed: note when it became bound, or stopped being bound."""
        was, now_bound = _bound(old), _bound(new)
        if was == now_bound:
            return
        at = self.clock()
        if now_bound and new is not None:
            rate = billing(workload_requests(new), self.weights)
            association = association_of(new, self._tenant_of, self.dispatcher.routing())
            self._open[key] = (association, rate, at)
        else:
            opened = self._open.pop(key, None)
            if opened is not None:
                self._closed.append((*opened, at))

    async def run(self) -> None:
        await self.state.synced.wait()
        while True:
            try:
                await self.update()
            except (HubError, store_base.StoreError) as exc:
                log.warning("fair share not brought up to date: %s", exc)
            await asyncio.sleep(self.period)

    async def load(self) -> None:
        """The usage the last term left (nothing, the first time)."""
        try:
            stored = await self.state.store.get(USAGE_KEY)
        except store_base.NotFound:
            self.loaded = True
            return
        value = stored.value
        self.usage, self._unqueued = {}, {}
        for row in value.get("usage", []):
            tenant, user, used = str(row["tenant"]), str(row["user"]), float(row["usage"])
            if "queue" in row:
                self.usage[Association(tenant, user, str(row["queue"]))] = used
            else:
                self._unqueued[Association(tenant, user)] = used
        updated = value.get("updatedAt")
        self.updated_at = datetime.fromisoformat(updated) if isinstance(updated, str) else None
        self.loaded = True

    async def update(self) -> FairTree:
        """Steps 1 to 4 at the clock's now; the tree it computed."""
        if not self.loaded:
            await self.load()
        now = self.clock()
        elapsed = (now - self.updated_at).total_seconds() if self.updated_at else 0.0
        elapsed = max(elapsed, 0.0)
        tenants = [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]
        tenant_of = self._tenant_of = _tenant_of(tenants)
        routing = self.dispatcher.routing()
        default_queue = {t.name: tenant_default_queue(t, routing) for t in tenants}
        self._move_unqueued(default_queue)
        usage = decay(self.usage, elapsed, self.half_life)
        # The charges are billing-seconds already: accrued over one second at that rate.
        self.usage = accrue(usage, self._charges(self.updated_at or now, now), 1.0)
        self.updated_at = now
        await self._persist()
        queues = [g for g in self.state.objects(GlobalQueue) if isinstance(g, GlobalQueue)]
        tree = fair_tree(
            {t.name: float(t.spec.fair_sharing_weight.value) for t in tenants},
            {t.name: t.spec.users for t in tenants},
            self.usage,
            queue_shares={g.name: float(g.spec.fair_sharing_weight.value) for g in queues},
            default_queue=default_queue,
            waiting=self._waiting(tenant_of),
        )
        self.dispatcher.fair_share = FairShareOrder(tree, tenant_of)
        await self._write_statuses(tenants, tree, now)
        return tree

    def _move_unqueued(self, default_queue: dict[str, str]) -> None:
        """Usage stored before queues were kept joins its tenant's default queue (added to
        what that association has already, so nothing is lost)."""
        for old, used in self._unqueued.items():
            moved = Association(old.tenant, old.user, default_queue.get(old.tenant, NO_QUEUE))
            self.usage[moved] = self.usage.get(moved, 0.0) + used
        self._unqueued = {}

    def _charges(self, since: datetime, now: datetime) -> list[tuple[Association, float]]:
        """Billing-seconds of this period per workload: its bound time within [since, now]
        times its rate. Open intervals are charged up to now and go on from there."""
        routing = self.dispatcher.routing()
        for key in _bound_keys(self.state):
            if key not in self._open:
                wl = self.state.workloads[key].workload
                rate = billing(workload_requests(wl), self.weights)
                self._open[key] = (association_of(wl, self._tenant_of, routing), rate, since)
        charges = []
        for association, rate, start, end in self._closed:
            seconds = (end - max(start, since)).total_seconds()
            charges.append((association, rate * max(seconds, 0.0)))
        self._closed = []
        for key, (association, rate, start) in list(self._open.items()):
            seconds = (now - max(start, since)).total_seconds()
            charges.append((association, rate * max(seconds, 0.0)))
            self._open[key] = (association, rate, now)
        return charges

    def _waiting(self, tenant_of: dict[str, str]) -> set[Association]:
        """The associations of work waiting for a cluster: each has a place in the tree."""
        routing = self.dispatcher.routing()
        found = set()
        for key in self.state.pending:
            entry = self.state.workloads.get(key)
            if entry is not None:
                found.add(association_of(entry.workload, tenant_of, routing))
        return found

    async def _persist(self) -> None:
        value: dict[str, Any] = {
            "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
            "usage": [
                {"tenant": a.tenant, "queue": a.queue, "user": a.user, "usage": round(u, 6)}
                for a, u in sorted(self.usage.items())
                if u >= 1e-6
            ],
        }
        store = self.state.store
        try:
            await store.update(USAGE_KEY, value, expected=None)
        except store_base.NotFound:
            await store.create(USAGE_KEY, value)

    async def _write_statuses(self, tenants: list[Tenant], tree: FairTree, now: datetime) -> None:
        rows = {row.name: row for row in tree.tenants}
        for tenant in tenants:
            row = rows.get(tenant.name)
            if row is None:
                continue
            want = TenantFairShare.model_validate(_status(row, tree, tenant.name))
            stored = tenant.status.fair_share if tenant.status else None
            if stored is not None and stored.model_copy(update={"last_update": None}) == want:
                continue
            want.last_update = now

            wire = want.to_wire()

            def mutate(value: dict[str, Any], wire: dict[str, Any] = wire) -> dict[str, Any]:
                value["status"] = {**(value.get("status") or {}), "fairShare": wire}
                return value

            try:
                await self.repo.modify(Tenant, tenant.name, None, mutate)
            except HubError as exc:  # deleted meanwhile, or the store is unavailable for now
                log.info("Tenant %s: fair share not written: %s", tenant.name, exc)


def _bound(wl: Workload | None) -> bool:
    return (
        wl is not None
        and wl.status is not None
        and bool(wl.status.cluster_name)
        and not transitions.is_finished(wl)
    )


def _bound_keys(state: HubState) -> set[str]:
    """Workloads bound to a cluster now (offered-only ones are not)."""
    found = set()
    for keys in state.by_cluster.values():
        for key in keys:
            entry = state.workloads.get(key)
            if entry is not None and _bound(entry.workload):
                found.add(key)
    return found


def _tenant_of(tenants: list[Tenant]) -> dict[str, str]:
    owner: dict[str, str] = {}
    for tenant in sorted(tenants, key=lambda t: t.name):
        for namespace in tenant.spec.namespaces:
            owner.setdefault(namespace, tenant.name)
    return owner


def _shown(value: float) -> float:
    """Three significant digits, as `sshare` shows: a status that moves only by its usage's
    slow decay is not rewritten every period (and does not race admins' edits)."""
    return float(f"{value:.3g}")


def _level(value: float) -> float | None:
    return None if value == float("inf") else _shown(value)


def _node(row: LevelRow) -> dict[str, Any]:
    return {
        "rawShares": row.raw_shares,
        "normShares": _shown(row.norm_shares),
        "rawUsage": _shown(row.raw_usage),
        "effectiveUsage": _shown(row.effective_usage),
        "levelFs": _level(row.level_fs),
    }


def _status(row: LevelRow, tree: FairTree, tenant: str) -> dict[str, Any]:
    """The tenant's row, its queues' and its users' (queue by queue), in the tree's order."""
    queues = tree.queues.get(tenant, ())
    return {
        **_node(row),
        "queues": [{"name": queue.name, **_node(queue)} for queue in queues],
        "users": [
            {
                "name": user.name,
                "queue": queue.name,
                "rawUsage": _shown(user.raw_usage),
                "effectiveUsage": _shown(user.effective_usage),
                "levelFs": _level(user.level_fs),
                "factor": _shown(user.factor or 0.0),
            }
            for queue in queues
            for user in tree.users.get((tenant, queue.name), ())
        ],
    }
