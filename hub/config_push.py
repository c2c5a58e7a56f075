"""Queues and flavors are defined once at the hub and pushed to agents, with the tenants'
namespaces and their tenant label: this module builds the ConfigSync message from the hub's
mirror and sends it to every connected agent whenever a configuration object or a tenant
changes (debounced, so a `qctl apply` of twenty objects is one push).

Called by: hub.app (wires `changed` as a HubState config listener, runs `run`), hub.sessions
(`build` for a newly connected agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TypeVar

from api.meta import Object
from api.v1alpha1.federation import TENANT_LABEL, MemberCluster, Tenant
from api.v1alpha1.messages import ConfigSync, NamespaceLabels
from api.v1alpha1.queues import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    Topology,
    WorkloadPriorityClass,
)
from hub.fleet import Fleet
from hub.lanes import LaneClosedError
from hub.state import HubState

__all__ = ["CONFIG_KINDS", "ConfigPusher", "tenant_namespaces"]

log = logging.getLogger(__name__)

CONFIG_KINDS = frozenset(
    k.plural()
    for k in (
        ResourceFlavor,
        ClusterQueue,
        LocalQueue,
        Cohort,
        WorkloadPriorityClass,
        Topology,
        Tenant,
    )
)
DEBOUNCE_SECONDS = 0.2
T = TypeVar("T", bound=Object)


def tenant_namespaces(tenants: list[Tenant]) -> list[NamespaceLabels]:
    """Every tenant's namespaces with the tenant label (`multiq.dev/tenant`), by name; a
    namespace two tenants claim goes with the first by name."""
    out: dict[str, NamespaceLabels] = {}
    for tenant in sorted(tenants, key=lambda t: t.name):
        for namespace in tenant.spec.namespaces:
            labels = {TENANT_LABEL: tenant.name}
            out.setdefault(namespace, NamespaceLabels(name=namespace, labels=labels))
    return [out[name] for name in sorted(out)]


@dataclass
class ConfigPusher:
    state: HubState
    fleet: Fleet
    pushes: int = 0
    _dirty: asyncio.Event = field(default_factory=asyncio.Event)
    _pushed_members: dict[str, object] = field(default_factory=dict)

    def build(self, cluster: str | None = None) -> ConfigSync:
        """The configuration, with `cluster`'s own settings (waitForPodsReady, admission fair
        sharing, fair sharing) when named."""
        sync = self._build()
        return self.for_cluster(sync, cluster) if cluster is not None else sync

    def for_cluster(self, sync: ConfigSync, cluster: str) -> ConfigSync:
        member = self.state.find(MemberCluster, cluster)
        if not isinstance(member, MemberCluster):
            return sync
        own = {
            "wait_for_pods_ready": member.spec.wait_for_pods_ready,
            "admission_fair_sharing": member.spec.admission_fair_sharing,
            "fair_sharing": member.spec.fair_sharing,
        }
        update = {name: value for name, value in own.items() if value is not None}
        return sync.model_copy(update=update) if update else sync

    def _member_settings(self) -> dict[str, object]:
        return {
            m.name: (m.spec.wait_for_pods_ready, m.spec.admission_fair_sharing, m.spec.fair_sharing)
            for m in self.state.objects(MemberCluster)
            if isinstance(m, MemberCluster)
        }

    def _build(self) -> ConfigSync:
        def of(kind: type[T]) -> list[T]:
            found = [o for o in self.state.objects(kind) if isinstance(o, kind)]
            return sorted(found, key=lambda o: o.key())

        return ConfigSync(
            revision=int(self.state.revision),
            resource_flavors=of(ResourceFlavor),
            cluster_queues=of(ClusterQueue),
            local_queues=of(LocalQueue),
            cohorts=of(Cohort),
            workload_priority_classes=of(WorkloadPriorityClass),
            topologies=of(Topology),
            namespaces=tenant_namespaces(of(Tenant)),
        )

    def changed(self, plural: str) -> None:
        if plural in CONFIG_KINDS:
            self._dirty.set()
        elif plural == MemberCluster.plural():
            # Members' status changes with every heartbeat: push only when a setting sent
            # to agents changed.
            settings = self._member_settings()
            if settings != self._pushed_members:
                self._dirty.set()

    async def run(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(DEBOUNCE_SECONDS)
            self._dirty.clear()
            self.push_all()

    def push_all(self) -> None:
        message = self._build()
        self._pushed_members = self._member_settings()
        self.pushes += 1
        for state in self.fleet.clusters.values():
            if state.control is not None and not state.control.closed:
                with contextlib.suppress(LaneClosedError):
                    state.control.send(self.for_cluster(message, state.name))
