"""The offer book: one record per workload of what the hub's dispatch remembers between
cycles beyond the workload's stored status — its open offers, the room they book on their
clusters, its last Waiting message, and the group it is parked in.

A record is frozen; every change replaces it (`DispatchBook.put`), and the book keeps, in
that one place, the indexes the cycle needs to be cheap over deep queues: the keys with open
offers, those dispatched incrementally, the room booked per cluster, and the parked groups
with their members. Forgetting a workload is one `drop`.

Pure data and bookkeeping: no I/O, no clock. The dispatch cycle (`hub.placement.cycle`) reads
the book through its snapshot and never changes it; the shell (`hub.dispatch`) applies the
cycle's plan and the agents' answers to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from api.v1alpha1.workload import Workload
from hub.placement.snapshot import DispatchMode, PlacementRequest
from hub.placement.topology import TopologyNeed

__all__ = [
    "Assumed",
    "DispatchBook",
    "DispatchRecord",
    "GroupRanking",
    "ParkedGroup",
    "Shape",
    "WaitingNote",
]

Shape = tuple[object, ...]
"""What decides the fate of workloads held back alike (see `hub.placement.cycle`)."""

RoomCell = tuple[str, str]
"""(cluster queue, flavor)."""


@dataclass(frozen=True, slots=True)
class Assumed:
    """Room an offer books on a cluster until the cluster's next capacity report after the
    offer was answered shows it (so one cycle never offers the same room twice)."""

    cluster_queue: str
    flavor: str
    requests: Mapping[str, int]
    answered: bool = False
    topology: tuple[TopologyNeed, ...] = ()
    """Its pod sets that require one domain of a level: they take a domain's room too."""
    reclaim: bool = False
    """Offered for room it gets by preemption (quota its queue lent to its cohort, or room
    lower priorities of its queue hold): the cluster queues it while it preempts, and the
    room stays booked meanwhile (another offer would count on the same room)."""


@dataclass(frozen=True, slots=True)
class WaitingNote:
    """The Waiting condition last written for a workload, and when."""

    reason: str
    message: str
    at: datetime


@dataclass(frozen=True, slots=True)
class DispatchRecord:
    offers: Mapping[str, datetime] = field(default_factory=dict)
    """Open offers of the current round: cluster → when offered."""
    queued: frozenset[str] = frozenset()
    """Clusters that answered an open offer with Pending: queued there, no timeout."""
    assumed: Mapping[str, Assumed] = field(default_factory=dict)
    mode: str = DispatchMode.BEST_FIT
    """The dispatch policy of the current round."""
    bound: bool = False
    """The open offer is bound (BestFit binds before it offers)."""
    waiting: WaitingNote | None = None
    parked: Shape | None = None
    parked_as: Workload | None = None
    """The workload as it was when parked: a newer version is a candidate again."""

    @property
    def empty(self) -> bool:
        return (
            not self.offers
            and not self.assumed
            and self.waiting is None
            and self.parked is None
            and self.mode == DispatchMode.BEST_FIT
        )


EMPTY = DispatchRecord()


@dataclass
class ParkedGroup:
    """Workloads held back for one reason that only a known change can lift.

    Either they fit nowhere (`request`: one placement of their shape answers for all, and
    only once room may have grown, `epoch`), or they would exceed their global queue's fleet
    quota (`over_quota`: global queue and requests; one check against the queue's usage
    answers for all) — either way until the configuration moves (`generation`). `latest` is
    the reason as last found; `told` the Waiting message every member was last written with
    (None when they differ), so a group is dissolved to tell its members a new reason."""

    request: PlacementRequest | None
    over_quota: tuple[str, Mapping[str, int]] | None
    epoch: int
    generation: int
    since: datetime
    latest: str
    told: str | None


@dataclass(frozen=True, slots=True)
class GroupRanking:
    """A parked group's members in dispatch order (sort key, key), made when the group was
    first opened and kept while it still holds: the same fair-share factors and routing
    (compared by identity: the shell makes new ones when they change) and no member joined
    the group since (`joined`, the book's count of joins). Members before `start` are known
    to have left the group."""

    fair_share: object
    routing: object
    joined: int
    ranked: tuple[tuple[tuple[object, ...], str], ...]
    start: int = 0

    def current(self, fair_share: object, routing: object, joined: int) -> bool:
        return self.fair_share is fair_share and self.routing is routing and self.joined == joined


@dataclass
class DispatchBook:
    records: dict[str, DispatchRecord] = field(default_factory=dict)
    offered: set[str] = field(default_factory=set)
    """Keys with an open offer (they wait for an answer, not for a cycle)."""
    awaiting: set[str] = field(default_factory=set)
    """Keys with an open offer not queued where it was made: the only ones an offer timeout
    can end (over a deep fleet queue, most offers are queued at their agents)."""
    incremental: set[str] = field(default_factory=set)
    """Keys with open offers of an Incremental round: looked at every cycle anyway."""
    room: dict[str, dict[RoomCell, dict[str, int]]] = field(default_factory=dict)
    """Per cluster and (cluster queue, flavor): the sum of the booked room."""
    booking: dict[str, set[str]] = field(default_factory=dict)
    """Per cluster: the keys whose offers book room there."""
    domains: dict[str, dict[str, tuple[str, tuple[TopologyNeed, ...]]]] = field(
        default_factory=dict
    )
    """Per cluster: the keys whose offers book room in a topology domain there, with their
    cluster queue and pod sets (hub.placement.topology.take_offered takes it from the report)."""
    groups: dict[Shape, ParkedGroup] = field(default_factory=dict)
    members: dict[Shape, set[str]] = field(default_factory=dict)
    parked: set[str] = field(default_factory=set)
    """Keys of every parked workload (the members of all groups)."""
    joined: dict[Shape, int] = field(default_factory=dict)
    """Per group: how many times a workload joined it (a `GroupRanking` made before the
    latest join is out of date)."""
    rankings: dict[Shape, GroupRanking] = field(default_factory=dict)
    """Per group opened before: its members' order (`hub.placement.cycle`)."""
    room_epoch: int = 0
    """Moves whenever room on the clusters may have grown: booked room given back, a
    capacity report, a cluster connecting or leaving."""

    def get(self, key: str) -> DispatchRecord:
        return self.records.get(key, EMPTY)

    def put(self, key: str, record: DispatchRecord) -> None:
        """Replace the record of `key`, keeping every index in step."""
        old = self.records.get(key, EMPTY)
        if record.empty:
            self.records.pop(key, None)
        else:
            self.records[key] = record
        if record.offers:
            self.offered.add(key)
        else:
            self.offered.discard(key)
        if any(cluster not in record.queued for cluster in record.offers):
            self.awaiting.add(key)
        else:
            self.awaiting.discard(key)
        if record.offers and record.mode == DispatchMode.INCREMENTAL:
            self.incremental.add(key)
        else:
            self.incremental.discard(key)
        if old.assumed != record.assumed:
            self._rebook(key, old.assumed, record.assumed)
        if old.parked != record.parked:
            if old.parked is not None:
                self._leave_group(key, old.parked)
                self.parked.discard(key)
            if record.parked is not None:
                self.members.setdefault(record.parked, set()).add(key)
                self.parked.add(key)
                self.joined[record.parked] = self.joined.get(record.parked, 0) + 1

    def drop(self, key: str) -> None:
        self.put(key, EMPTY)

    def update(self, key: str, **changes: object) -> DispatchRecord:
        record = replace(self.get(key), **changes)  # type: ignore[arg-type]
        self.put(key, record)
        return record

    def workload_changed(self, key: str, workload: Workload | None) -> None:
        """The mirror's entry for `key` changed: a parked workload that changed is a
        candidate again, and one finished or deleted is forgotten (a long-lived hub must not
        grow)."""
        record = self.records.get(key)
        if record is None:
            return
        if record.parked is not None and workload is not record.parked_as:
            self.update(key, parked=None, parked_as=None)
        if workload is None or workload.is_condition_true("Finished"):
            self.drop(key)

    def room_grew(self) -> None:
        self.room_epoch += 1

    # --- offers -------------------------------------------------------------------------

    def close_offer(self, key: str, cluster: str) -> None:
        """The offer to `cluster` is answered or void."""
        record = self.get(key)
        if cluster in record.offers or cluster in record.queued:
            offers = {c: t for c, t in record.offers.items() if c != cluster}
            self.put(key, replace(record, offers=offers, queued=record.queued - {cluster}))

    def mark_queued(self, key: str, cluster: str) -> None:
        """The cluster answered Pending: the offer stays open (no timeout, no re-offer) until
        it reserves, admits, rejects or loses it; it books no room meanwhile, but for an offer
        that takes back lent quota (its preemptions are under way for that room)."""
        record = self.get(key)
        assumed = {c: a for c, a in record.assumed.items() if c != cluster or a.reclaim}
        self.put(key, replace(record, queued=record.queued | {cluster}, assumed=assumed))

    def mark_answered(self, key: str, cluster: str) -> None:
        """The cluster answered: its next capacity report shows the room the offer took."""
        record = self.get(key)
        item = record.assumed.get(cluster)
        if item is not None and not item.answered:
            assumed = {**record.assumed, cluster: replace(item, answered=True)}
            self.put(key, replace(record, assumed=assumed))

    def give_back_room(self, key: str, cluster: str | None = None) -> None:
        """Give back the room booked on `cluster` (every cluster when None)."""
        record = self.get(key)
        if record.assumed and (cluster is None or cluster in record.assumed):
            kept = {c: a for c, a in record.assumed.items() if cluster is not None and c != cluster}
            self.put(key, replace(record, assumed=kept))

    def keys_booking(self, cluster: str, *, answered_only: bool = False) -> list[str]:
        """The workloads whose offers book room on `cluster`."""
        return [
            key
            for key in sorted(self.booking.get(cluster, ()))
            if self.records[key].assumed[cluster].answered or not answered_only
        ]

    # --- parking ------------------------------------------------------------------------

    def dissolve(self, shape: Shape) -> None:
        """Its members are candidates again."""
        self._forget_group(shape)
        for key in self.members.pop(shape, set()):
            record = self.records.get(key)
            if record is not None:
                self.put(key, replace(record, parked=None, parked_as=None))

    def _leave_group(self, key: str, shape: Shape) -> None:
        keys = self.members.get(shape)
        if keys is None:
            return
        keys.discard(key)
        if not keys:
            del self.members[shape]
            self._forget_group(shape)

    def _forget_group(self, shape: Shape) -> None:
        """The group, its count of joins and its members' order (not its members)."""
        self.groups.pop(shape, None)
        self.joined.pop(shape, None)
        self.rankings.pop(shape, None)

    # --- booked room --------------------------------------------------------------------

    def _rebook(self, key: str, old: Mapping[str, Assumed], new: Mapping[str, Assumed]) -> None:
        for cluster, item in old.items():
            if not _same_room(new.get(cluster), item):
                self._book(cluster, item, -1)
                self.room_grew()
            if cluster not in new:
                keys = self.booking.get(cluster)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.booking[cluster]
        for cluster, item in new.items():
            if not _same_room(old.get(cluster), item):
                self._book(cluster, item, 1)
            self.booking.setdefault(cluster, set()).add(key)
        if any(a.topology for a in old.values()) or any(a.topology for a in new.values()):
            self._book_domains(key, new)

    def _book(self, cluster: str, item: Assumed, sign: int) -> None:
        cell = self.room.setdefault(cluster, {}).setdefault((item.cluster_queue, item.flavor), {})
        for resource, amount in item.requests.items():
            cell[resource] = cell.get(resource, 0) + sign * amount

    def _book_domains(self, key: str, new: Mapping[str, Assumed]) -> None:
        for cluster in list(self.domains):
            if cluster not in new or not new[cluster].topology:
                booked = self.domains[cluster]
                booked.pop(key, None)
                if not booked:
                    del self.domains[cluster]
        for cluster, item in new.items():
            if item.topology:
                self.domains.setdefault(cluster, {})[key] = (item.cluster_queue, item.topology)


def _same_room(a: Assumed | None, b: Assumed | None) -> bool:
    """Both book the same room (whether the offer was answered does not change it)."""
    if a is None or b is None:
        return a is b
    return (a.cluster_queue, a.flavor, a.requests, a.topology) == (
        b.cluster_queue,
        b.flavor,
        b.requests,
        b.topology,
    )
