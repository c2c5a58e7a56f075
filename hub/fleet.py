"""The hub's live view of its member clusters: who is connected, since when one is lost, what
each reported about its capacity, and which workloads its agent says it holds.

The MemberCluster objects in the store say which clusters exist (and their labels, token,
cordon and fencing settings); sessions say which are connected. `Fleet` joins the two and
turns capacity reports into the frozen `ClusterView`s placement reads, and keeps what the
fencing rules need (docs/exactly-once.md): since when a cluster is lost, until when its agent
may believe it holds a lease, and, for a cluster that left the fleet, from when its work may
run elsewhere. Connection changes are written to MemberCluster status so `qctl get clusters`
shows them.

Called by: hub.sessions (connect, reports, disconnect), hub.dispatch (views, loss checks),
hub.app (loading clusters and agent tokens).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.quantity import Quantity, resource_amount
from api.tokens import TokenHashError, parse_token_hash
from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.messages import CapacityReport, HeldWorkload
from api.v1alpha1.workload import Admission
from hub.auth import TokenAuthority, token_from_ref
from hub.lanes import Lane
from hub.objects import ObjectRepository
from hub.placement.cycle import ClusterFacts
from hub.placement.snapshot import ClusterName, ClusterView, FlavorHeadroom, QueueView
from hub.placement.topology import TopologyNeed, TopologyView, take_offered, topology_views

__all__ = ["ClusterState", "Fleet", "FreedRoom", "admission_room", "capacity_cells"]

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


RoomCell = tuple[str, str]
"""(cluster queue, flavor)."""


@dataclass(frozen=True, slots=True)
class FreedRoom:
    """Room a finished workload gave back on its cluster, per (cluster queue, flavor) and
    resource in milli-units, as the agent observed it at `observed_at`."""

    observed_at: datetime
    cells: Mapping[RoomCell, Mapping[str, int]]


def admission_room(admission: Admission) -> dict[RoomCell, dict[str, int]]:
    """The room an admission takes on its cluster, per (cluster queue, flavor) and resource,
    in milli-units."""
    room: dict[RoomCell, dict[str, int]] = {}
    for assignment in admission.pod_set_assignments:
        for resource, flavor in assignment.flavors.items():
            amount = assignment.resource_usage.get(resource)
            if amount is None:
                continue
            cell = room.setdefault((admission.cluster_queue, flavor), {})
            cell[resource] = cell.get(resource, 0) + _milli(amount)
    return room


@dataclass
class ClusterState:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    cordoned: bool = False
    loss_timeout_seconds: float = 900.0
    lease_seconds: float = 60.0
    grace_seconds: float = 30.0
    fencing: bool = True
    lease_expires: datetime | None = None
    """The latest its agent may believe it holds a lease (renewals received + lease)."""
    renewed_at: datetime | None = None
    """When its agent last renewed its lease (over this session)."""
    control: Lane | None = None
    logs: Lane | None = None
    connected_at: datetime | None = None
    lost_since: datetime | None = None
    last_seen: datetime | None = None
    agent_version: str = ""
    kubernetes_version: str = ""
    capacity: CapacityReport | None = None
    # The last capacity report in milli-units, converted once when it arrives.
    cells: dict[tuple[str, str], tuple[dict[str, int], dict[str, int]]] = field(
        default_factory=dict
    )
    held: dict[str, HeldWorkload] = field(default_factory=dict)
    config_revision: int | None = None
    # The last capacity report's topologies as placement reads them, and the report they
    # were read from (converted once per report, not once per cycle).
    topologies: dict[str, TopologyView] | None = None
    topologies_of: CapacityReport | None = None
    reclaimable: dict[RoomCell, dict[str, int]] = field(default_factory=dict)
    """Per (cluster queue, flavor) of the last capacity report: its nominal quota not in use
    (what it may take back from its cohort's borrowers), in milli-units."""
    freed: list[FreedRoom] = field(default_factory=list)
    """Room workloads that finished here gave back, not yet in a capacity report."""

    def free_room(self, observed_at: datetime, cells: Mapping[RoomCell, Mapping[str, int]]) -> bool:
        """A workload observed finished at `observed_at` gave back `cells`: count them as
        free until a capacity report observed no earlier shows them, so the room is offered
        again at once rather than after the agent's next report. False (nothing counted)
        when the last report is that recent already."""
        if not cells or (self.capacity is not None and self.capacity.observed_at >= observed_at):
            return False
        self.freed.append(FreedRoom(observed_at, cells))
        return True

    def report_received(self, report: CapacityReport) -> None:
        self.capacity = report
        self.cells = capacity_cells(report)
        self.reclaimable = reclaimable_cells(report)
        # What it observed after (or when) a workload finished already shows its room.
        self.freed = [f for f in self.freed if f.observed_at > report.observed_at]

    @property
    def connected(self) -> bool:
        return self.control is not None and not self.control.closed

    def lost_for(self, now: datetime) -> float:
        """Seconds since the cluster was lost (0 while connected or never seen)."""
        if self.connected or self.lost_since is None:
            return 0.0
        return (now - self.lost_since).total_seconds()

    def renew_lease(self, now: datetime) -> None:
        self.renewed_at = now
        expires = now + timedelta(seconds=self.lease_seconds)
        self.lease_expires = max(self.lease_expires or expires, expires)

    def assume_granted(self, now: datetime) -> None:
        """A hub that starts, or becomes leader, cannot know what its predecessor granted:
        it assumes a lease renewed this very moment (never earlier than the real one)."""
        expires = now + timedelta(seconds=self.lease_seconds)
        self.lease_expires = max(self.lease_expires or expires, expires)
        if not self.connected:
            self.lost_since = max(self.lost_since or now, now)

    def lease_overdue(self, now: datetime) -> bool:
        """Connected, yet its agent has not renewed for a whole lease: it may have fenced
        itself, or be frozen. The session is treated as lost."""
        if not self.connected or not self.fencing or self.connected_at is None:
            return False
        last = max(self.renewed_at or self.connected_at, self.connected_at)
        return (now - last).total_seconds() > self.lease_seconds

    def facts(self) -> ClusterFacts:
        return ClusterFacts(
            name=self.name,
            connected=self.connected,
            lost_since=self.lost_since,
            loss_timeout_seconds=self.loss_timeout_seconds,
            lease_expires=self.lease_expires,
            grace_seconds=self.grace_seconds,
            fencing=self.fencing,
        )


def _milli(q: Quantity) -> int:
    return q.milli()


class Fleet:
    def __init__(
        self,
        repo: ObjectRepository,
        authority: TokenAuthority,
        *,
        secrets_dir: Path | None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.repo = repo
        self.authority = authority
        self.secrets_dir = secrets_dir
        self.clock = clock
        self.clusters: dict[str, ClusterState] = {}
        self.departed: dict[str, ClusterFacts] = {}
        """Clusters that left the fleet, and from when their work may run elsewhere."""

    # --- membership -------------------------------------------------------------------------

    def load(self, members: list[MemberCluster]) -> None:
        """Apply the MemberCluster objects: new ones appear, removed ones go, tokens refresh."""
        seen = set()
        now = self.clock()
        for member in members:
            seen.add(member.name)
            state = self.clusters.get(member.name)
            fencing = member.spec.fencing
            if state is None:
                state = self.clusters[member.name] = ClusterState(member.name)
                state.lease_seconds = float(fencing.lease_seconds)
                state.assume_granted(now)
            self.departed.pop(member.name, None)
            state.labels = dict(member.metadata.labels)
            state.cordoned = member.spec.cordoned
            state.fencing = fencing.enabled
            state.loss_timeout_seconds = float(fencing.loss_timeout_seconds)
            state.lease_seconds = float(fencing.lease_seconds)
            state.grace_seconds = float(fencing.grace_seconds)
            self._know_agent(member)
        for name in list(self.clusters):
            if name not in seen:
                self._depart(self.clusters.pop(name), now)

    def _know_agent(self, member: MemberCluster) -> None:
        """How this cluster's agent proves itself: its token's hash, or the token read from
        the secret its tokenRef names."""
        spec = member.spec
        if spec.token_hash is not None:
            try:
                self.authority.set_agent_token_hash(member.name, parse_token_hash(spec.token_hash))
            except TokenHashError as exc:  # (validation refuses these; an old store may not)
                log.warning("cluster %s: its tokenHash is refused: %s", member.name, exc)
                self.authority.set_agent_token(member.name, None)
            return
        ref = spec.token_ref
        token = None
        if ref is not None:
            token = token_from_ref(ref.secret_name, ref.key, ref.file, self.secrets_dir)
        if token is None:
            log.warning("cluster %s: no token found for its tokenRef", member.name)
        self.authority.set_agent_token(member.name, token)

    def _depart(self, state: ClusterState, now: datetime) -> None:
        """A cluster left the fleet: no new session, no more lease; its work may run
        elsewhere once the lease it may hold has run out and it had the grace to stop (at once
        when fencing was off: deleting the member is then the admin's decision)."""
        self.authority.set_agent_token(state.name, None)
        let_go_at = now
        if state.fencing and state.lease_expires is not None:
            let_go_at = max(now, state.lease_expires + timedelta(seconds=state.grace_seconds))
        self.departed[state.name] = ClusterFacts(
            state.name, connected=False, member=False, let_go_at=let_go_at
        )
        for lane in (state.control, state.logs):
            if lane is not None and not lane.closed:
                lane.close_soon()

    def get(self, name: str) -> ClusterState | None:
        return self.clusters.get(name)

    def took_over(self, now: datetime) -> None:
        """This hub starts dispatching now (started, or elected leader): see
        `ClusterState.assume_granted`."""
        for state in self.clusters.values():
            state.assume_granted(now)

    def facts(self) -> dict[str, ClusterFacts]:
        """What the fencing rules need of every cluster, members and departed."""
        facts = dict(self.departed)
        for name, state in self.clusters.items():
            facts[name] = state.facts()
        return facts

    # --- connection state -------------------------------------------------------------------

    async def write_status(self, state: ClusterState) -> None:
        """Reflect connection state and capacity in MemberCluster.status."""

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            status = dict(value.get("status") or {})
            status["connected"] = state.connected
            status["agentVersion"] = state.agent_version
            status["kubernetesVersion"] = state.kubernetes_version
            if state.last_seen:
                status["lastHeartbeatTime"] = _iso(state.last_seen)
            if state.lost_since and not state.connected:
                status["lostSince"] = _iso(state.lost_since)
            else:
                status.pop("lostSince", None)
            if state.capacity is not None:
                status["capacity"] = _capacity_status(state.capacity)
            value["status"] = status
            return value

        try:
            await self.repo.modify(MemberCluster, state.name, None, mutate)
        except Exception as exc:  # the cluster object may have just been deleted
            log.info("cluster %s: status not written: %s", state.name, exc)

    # --- views for placement ----------------------------------------------------------------

    def views(
        self,
        assumed: Mapping[str, Mapping[tuple[str, str], Mapping[str, int]]],
        domains: Mapping[str, Mapping[str, tuple[str, tuple[TopologyNeed, ...]]]] | None = None,
        reclaiming: Set[str] = frozenset(),
    ) -> list[ClusterView]:
        """Frozen views of every known cluster. `assumed` holds, per cluster and (cluster
        queue, flavor), requests offered since its last capacity report, subtracted from the
        reported headroom so one cycle does not offer the same room twice; `domains`, per
        cluster, the offers' pod sets that take a topology domain's room (by workload);
        `reclaiming`, the cluster queues that take back lent quota from any borrower (their
        unused nominal quota is room by preemption)."""
        views = []
        for state in self.clusters.values():
            if state.topologies_of is not state.capacity:
                state.topologies_of = state.capacity
                report = state.capacity
                state.topologies = topology_views(report.topologies if report else None)
            queues: dict[str, list[FlavorHeadroom]] = {}
            minus = assumed.get(state.name, {})
            plus: dict[RoomCell, dict[str, int]] = {}
            for freed in state.freed:
                for room_cell, amounts in freed.cells.items():
                    cell = plus.setdefault(room_cell, {})
                    for r, v in amounts.items():
                        cell[r] = cell.get(r, 0) + v
            for (cq, flavor), (headroom, capacity) in state.cells.items():
                taken = minus.get((cq, flavor))
                given = plus.get((cq, flavor))
                free = headroom
                if taken or given:
                    free = {
                        r: min(
                            capacity.get(r, v),
                            v - (taken or {}).get(r, 0) + (given or {}).get(r, 0),
                        )
                        for r, v in headroom.items()
                    }
                lent: Mapping[str, int] = {}
                if cq in reclaiming:
                    lent = state.reclaimable.get((cq, flavor), {})
                    if taken:
                        lent = {r: v - taken.get(r, 0) for r, v in lent.items()}
                queues.setdefault(cq, []).append(FlavorHeadroom(flavor, free, capacity, lent))
            topologies: Mapping[str, TopologyView] | None = state.topologies
            if topologies is not None:
                for _, (cq, needs) in sorted((domains or {}).get(state.name, {}).items()):
                    flavors = [cell.flavor for cell in queues.get(cq, [])]
                    topologies = take_offered(topologies, flavors, needs)
            views.append(
                ClusterView(
                    ClusterName(state.name),
                    state.labels,
                    connected=state.connected,
                    reported=state.capacity is not None or bool(state.cells),
                    cordoned=state.cordoned,
                    queues={
                        cq: QueueView(cq, tuple(fl), reclaims=cq in reclaiming)
                        for cq, fl in queues.items()
                    },
                    topologies=topologies,
                )
            )
        return views


def reclaimable_cells(report: CapacityReport) -> dict[RoomCell, dict[str, int]]:
    """(cluster queue, flavor) → per resource, the nominal quota not in use (milli-units)."""
    cells: dict[RoomCell, dict[str, int]] = {}
    for cell in report.queues:
        unused = _milli(cell.nominal) - _milli(cell.usage)
        cells.setdefault((cell.cluster_queue, cell.flavor), {})[cell.resource] = max(0, unused)
    return cells


def capacity_cells(
    report: CapacityReport,
) -> dict[tuple[str, str], tuple[dict[str, int], dict[str, int]]]:
    """(cluster queue, flavor) → (headroom, capacity) per resource, in milli-units."""
    cells: dict[tuple[str, str], tuple[dict[str, int], dict[str, int]]] = {}
    for cell in report.queues:
        headroom, capacity = cells.setdefault((cell.cluster_queue, cell.flavor), ({}, {}))
        free = headroom[cell.resource] = _milli(cell.headroom)
        capacity[cell.resource] = max(_milli(cell.nominal), _milli(cell.usage) + free)
    return cells


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _capacity_status(report: CapacityReport) -> dict[str, Any]:
    totals: dict[str, dict[str, int]] = {}
    flavors: dict[tuple[str, str], list[dict[str, str]]] = {}
    for cell in report.queues:
        flavors.setdefault((cell.cluster_queue, cell.flavor), []).append(
            {
                "name": cell.resource,
                "allocatable": cell.nominal.canonical(),
                "used": cell.usage.canonical(),
                "headroom": cell.headroom.canonical(),
            }
        )
    for name, amount in report.nodes.allocatable.items():
        totals.setdefault(name, {})["allocatable"] = amount.milli()
    for name, amount in report.nodes.free.items():
        totals.setdefault(name, {})["free"] = amount.milli()
    resources = []
    for name, values in sorted(totals.items()):
        alloc = values.get("allocatable", 0)
        free = values.get("free", alloc)
        resources.append(
            {
                "name": name,
                "allocatable": resource_amount(name, alloc).canonical(),
                "used": resource_amount(name, max(0, alloc - free)).canonical(),
                "headroom": resource_amount(name, free).canonical(),
            }
        )
    return {
        "nodes": report.nodes.total,
        "readyNodes": report.nodes.ready,
        "schedulableNodes": report.nodes.schedulable,
        "resources": resources,
        "flavors": [
            {"clusterQueue": cq, "flavor": fl, "resources": res}
            for (cq, fl), res in sorted(flavors.items())
        ],
    }
