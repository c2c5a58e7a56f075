"""Hub ↔ agent wire messages: a versioned envelope carrying one typed payload.

The session is a long-lived WebSocket the agent opens. Every message travels in an `Envelope`
{protocolVersion, type, seq, ack, traceContext?, payload}: `seq` numbers the sender's messages
(per session, from 1), `ack` acknowledges the peer's messages up to that number, so a
redelivered message is recognised by its `seq` and dropped. `traceContext` carries the W3C
trace headers so a workload keeps one trace from submit to finish. The payload is a
discriminated union on its `type`, which equals the envelope's.

    agent → hub: Hello, CapacityReport, WorkloadStatus, LogData, OfferRejected, LeaseRenew, Ack
    hub → agent: ConfigSync, DispatchOffer, Bind, Withdraw, Cancel, LeaseGrant, LogOpen,
                 LogClose, Ack

Dispatch is fenced by generation: the hub offers a workload with a dispatch generation; every
later message about it (status, rejection, bind, withdraw, cancel) names that generation, and
a side ignores messages about an older generation than the one it holds. Reserve, bind and
the lease are described in docs/exactly-once.md: an offer is either bound (run it when it
fits) or a reservation request (hold quota, create nothing, report Reserved, wait for Bind);
the agent renews a lease over the session and stops its work when it cannot.

Called by: the hub's session endpoint and the agent's hub client (both sides encode/decode
with `Envelope.to_json` / `Envelope.from_json`), tests.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal, Self, cast

from pydantic import Field, StringConstraints, ValidationError, field_validator, model_validator
from pydantic_core import from_json

from api.codec import pydantic_errors_to_field_errors
from api.errors import ApiError, FieldError, Path
from api.k8s.pod import ResourceList
from api.logstamps import InvalidStampError, all_canonical, canonical_stamp
from api.meta import (
    Condition,
    Object,
    StrictModel,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_map_errors,
)
from api.quantity import Quantity
from api.v1alpha1.federation import AdmissionFairSharing, FairSharing, WaitForPodsReady
from api.v1alpha1.queues import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    Topology,
    WorkloadPriorityClass,
)
from api.v1alpha1.workload import Admission, Workload

__all__ = [
    "AGENT_TO_HUB",
    "HUB_TO_AGENT",
    "LOG_MESSAGES",
    "PROTOCOL_VERSION",
    "Ack",
    "Bind",
    "Cancel",
    "CapacityReport",
    "ConfigSync",
    "ContainerExit",
    "DispatchOffer",
    "DomainRoom",
    "Envelope",
    "HeldWorkload",
    "Hello",
    "InventorySummary",
    "LeaseGrant",
    "LeaseRenew",
    "LevelRoom",
    "LocalQueueUsage",
    "LogClose",
    "LogData",
    "LogLine",
    "LogOpen",
    "MessageInvalidError",
    "MessageType",
    "NamespaceLabels",
    "NodeGroupRoom",
    "NodeSummary",
    "OfferRejected",
    "Payload",
    "PodCounts",
    "QueueCapacity",
    "RejectReason",
    "TopologyRoom",
    "TraceContext",
    "Withdraw",
    "WorkloadPhase",
    "WorkloadStatusReport",
    "message_field_errors",
]

PROTOCOL_VERSION = 2
SUPPORTED_PROTOCOL_VERSIONS = frozenset({2})
"""Version 2 added reserve-then-bind and leases; a version-1 peer would run reservations."""

WorkloadKey = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]
"""`namespace/name` of a Workload."""

Generation = Annotated[int, Field(ge=1)]
"""A dispatch generation: raised by the hub every time it offers a workload anew."""


class MessageType(enum.StrEnum):
    HELLO = "Hello"
    CAPACITY_REPORT = "CapacityReport"
    WORKLOAD_STATUS = "WorkloadStatus"
    LOG_DATA = "LogData"
    OFFER_REJECTED = "OfferRejected"
    LEASE_RENEW = "LeaseRenew"
    ACK = "Ack"
    CONFIG_SYNC = "ConfigSync"
    DISPATCH_OFFER = "DispatchOffer"
    BIND = "Bind"
    LEASE_GRANT = "LeaseGrant"
    WITHDRAW = "Withdraw"
    CANCEL = "Cancel"
    LOG_OPEN = "LogOpen"
    LOG_CLOSE = "LogClose"


AGENT_TO_HUB = frozenset(
    {
        MessageType.HELLO,
        MessageType.CAPACITY_REPORT,
        MessageType.WORKLOAD_STATUS,
        MessageType.LOG_DATA,
        MessageType.OFFER_REJECTED,
        MessageType.LEASE_RENEW,
        MessageType.ACK,
    }
)
HUB_TO_AGENT = frozenset(
    {
        MessageType.CONFIG_SYNC,
        MessageType.DISPATCH_OFFER,
        MessageType.BIND,
        MessageType.WITHDRAW,
        MessageType.CANCEL,
        MessageType.LOG_OPEN,
        MessageType.LOG_CLOSE,
        MessageType.LEASE_GRANT,
        MessageType.ACK,
    }
)
# Log traffic goes on its own lane so it never delays control messages.
LOG_MESSAGES = frozenset({MessageType.LOG_DATA, MessageType.LOG_OPEN, MessageType.LOG_CLOSE})


class WorkloadPhase(enum.StrEnum):
    """Where a dispatched workload is on its cluster, as the agent sees it."""

    PENDING = "Pending"  # offered, waiting for local quota
    RESERVED = "Reserved"  # a reservation request admitted: quota held, nothing created
    ADMITTED = "Admitted"  # bound and admitted: quota reserved, objects created
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    EVICTED = "Evicted"  # preempted or timed out locally; the hub decides what next
    WITHDRAWN = "Withdrawn"  # stopped at the hub's request, or a reservation released


class RejectReason(enum.StrEnum):
    """Why an agent refused a DispatchOffer."""

    NO_SUCH_QUEUE = "NoSuchQueue"
    INADMISSIBLE = "Inadmissible"  # can never fit this cluster (flavors, max quota)
    INVALID = "Invalid"
    STALE_GENERATION = "StaleGeneration"
    FENCED = "Fenced"  # the agent is isolated from its cluster and takes no new work
    SHUTTING_DOWN = "ShuttingDown"


# --- agent → hub ----------------------------------------------------------------------------


class InventorySummary(StrictModel):
    kubernetes_version: str | None = None
    nodes: int = 0
    ready_nodes: int = 0
    allocatable: ResourceList = Field(default_factory=dict)
    flavors: list[str] = Field(default_factory=list)


class HeldWorkload(StrictModel):
    """A workload the agent holds, so both sides reconcile after a reconnect."""

    workload: WorkloadKey
    generation: Generation
    phase: WorkloadPhase


class Hello(StrictModel):
    type: Literal["Hello"] = "Hello"
    cluster: str
    agent_version: str
    config_revision: int | None = None
    inventory: InventorySummary = Field(default_factory=InventorySummary)
    workloads: list[HeldWorkload] = Field(default_factory=list)


class QueueCapacity(StrictModel):
    """One (cluster queue, flavor, resource) cell of a cluster's quota."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: Quantity
    usage: Quantity
    headroom: Quantity  # what a new workload could still get, borrowing included


class WeightedShare(StrictModel):
    """Fair sharing: a ClusterQueue's or Cohort's weighted share in this cluster, per mille
    (Kueue's `status.fairSharing.weightedShare`; the largest int64 when infinite)."""

    kind: Literal["ClusterQueue", "Cohort"]
    name: str
    weighted_share: int


class NodeSummary(StrictModel):
    total: int = 0
    ready: int = 0
    schedulable: int = 0
    allocatable: ResourceList = Field(default_factory=dict)
    free: ResourceList = Field(default_factory=dict)


class NodeGroupRoom(StrictModel):
    """Nodes of one domain that have the same room: how many, and what each has."""

    nodes: int = Field(ge=1)
    room: ResourceList


class DomainRoom(StrictModel):
    """One topology domain (its value of the level's label) and its nodes' room, grouped."""

    name: str
    nodes: list[NodeGroupRoom] = Field(default_factory=list)


class LevelRoom(StrictModel):
    """The room of one level's domains, compact: the domains with the most of each resource
    in full (their nodes' room, so the hub counts how many pods of a shape fit exactly), and
    for all others only a bound (per resource, the most any of them has in total).

    `free` is the room now; `allocatable` the room when empty, cordoned and not-ready nodes
    included (what could ever fit there). docs/topology.md explains the choice."""

    level: str
    domains: int = 0
    free: list[DomainRoom] = Field(default_factory=list)
    free_elsewhere: ResourceList = Field(default_factory=dict)
    allocatable: list[DomainRoom] = Field(default_factory=list)
    allocatable_elsewhere: ResourceList = Field(default_factory=dict)


class TopologyRoom(StrictModel):
    """The domains of one flavor that has a topology, level by level, widest first."""

    flavor: str
    topology: str
    levels: list[LevelRoom] = Field(default_factory=list)


class LocalQueueUsage(StrictModel):
    """One local queue's decayed consumed resources in this cluster (admission fair sharing:
    Kueue's `status.fairSharing.admissionFairSharingStatus`), as of `lastUpdate`."""

    namespace: str
    name: str
    consumed_resources: dict[str, Quantity] = Field(default_factory=dict)
    last_update: datetime


class CapacityReport(StrictModel):
    type: Literal["CapacityReport"] = "CapacityReport"
    cluster: str
    observed_at: datetime
    config_revision: int | None = None
    queues: list[QueueCapacity] = Field(default_factory=list)
    nodes: NodeSummary = Field(default_factory=NodeSummary)
    topologies: list[TopologyRoom] | None = None
    """Per flavor with a topology, its domains' room (agents since topology-aware placement;
    None from older agents: the hub then places without it). An empty list: no flavor of
    this cluster has a topology."""
    local_queues: list[LocalQueueUsage] = Field(default_factory=list)
    """Admission fair sharing: the usage of every local queue whose cluster queue orders by
    it (none when it is off)."""
    weighted_shares: list[WeightedShare] = Field(default_factory=list)
    """Fair sharing: every cluster queue's and cohort's weighted share (none when it is off)."""
    admitted: list[HeldWorkload] = Field(default_factory=list)
    """Workloads admitted here whose report has not gone yet (Admitted waits for their pods
    to start, at most the status interval): the usage above counts them, so the hub takes
    this as their offers' answer (the room booked for them is free once it has this)."""


class PodCounts(StrictModel):
    pending: int = 0
    running: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    nodes: list[str] = Field(default_factory=list)
    """The nodes the pods were scheduled to, sorted, each once (at most agent.status's
    MAX_NODES): what Slurm's squeue and sacct call the job's NodeList."""


class ContainerExit(StrictModel):
    pod: str
    container: str
    exit_code: int
    reason: str = ""
    message: str = ""


class WorkloadStatusReport(StrictModel):
    """A transition of a dispatched workload on its cluster (type "WorkloadStatus")."""

    type: Literal["WorkloadStatus"] = "WorkloadStatus"
    workload: WorkloadKey
    generation: Generation
    phase: WorkloadPhase
    observed_at: datetime | None = None
    conditions: list[Condition] = Field(default_factory=list)
    admission: Admission | None = None
    pods: PodCounts = Field(default_factory=PodCounts)
    exits: list[ContainerExit] = Field(default_factory=list)
    pending_reason: str | None = None
    pending_message: str = ""


class LogLine(StrictModel):
    timestamp: str | None = None
    """When the cluster says the line was written, as api.logstamps' canonical RFC 3339 text
    (`2026-12-04T10:00:00.123456+00:00`): compared as a string, never parsed per line. On the
    wire it is the JSON string it always was (a datetime before): an older agent's form is made
    canonical by `LogData`, an older hub parses this one into its datetime."""
    text: str


class LogData(StrictModel):
    type: Literal["LogData"] = "LogData"
    stream_id: str
    workload: WorkloadKey
    cluster: str
    pod: str
    container: str
    lines: list[LogLine] = Field(default_factory=list)
    # Lines the agent's bounded buffer had to drop before this batch. (Agents since the log
    # sequence numbers hold their readers back instead and never drop; kept for old ones.)
    dropped: int = 0
    eof: bool = False
    # The sequence number of `lines[0]` in its container's log, 1-based, counted by the
    # agent's reader; consecutive frames of one (pod, container) continue it, so a receiver
    # can count any gap. 0: not numbered (an older agent).
    seq: Annotated[int, Field(ge=0)] = 0
    # The numbering counts from the container's first line (the reader started at the start
    # of the log, no tail or since): the hub may keep these lines durably.
    from_start: bool = False
    # Sent unasked, before the workload's pods may go (`shipped`): the generation the agent
    # holds it at; the hub keeps the lines only while that cluster holds that generation's
    # binding.
    shipped: bool = False
    generation: Generation | None = None
    # With the eof of a shipped (pod, container): what the ship limit left behind.
    unshipped_lines: Annotated[int, Field(ge=0)] = 0
    unshipped_bytes: Annotated[int, Field(ge=0)] = 0
    # With the eof of a shipped (pod, container): the lines the ship had read and not sent
    # when its time bound cut it off (the Jobs were deleted; a lower bound: what it had not
    # read yet is not known).
    cut_off_lines: Annotated[int, Field(ge=0)] = 0
    cut_off_bytes: Annotated[int, Field(ge=0)] = 0

    @field_validator("lines")
    @classmethod
    def _canonical_stamps(cls, lines: list[LogLine]) -> list[LogLine]:
        """Every line's stamp in the canonical form: checked for the whole frame in one call
        (what a current agent sends), made canonical line by line only otherwise (an older
        agent's datetime JSON); a malformed stamp refuses the frame, naming the line."""
        stamps = [line.timestamp for line in lines]
        if None not in stamps and all_canonical(cast("list[str]", stamps)):
            return lines
        for n, line in enumerate(lines):
            if line.timestamp is not None:
                try:
                    line.timestamp = canonical_stamp(line.timestamp)
                except InvalidStampError as exc:
                    raise ValueError(f"lines[{n}].timestamp: {exc}") from None
        return lines


class OfferRejected(StrictModel):
    type: Literal["OfferRejected"] = "OfferRejected"
    workload: WorkloadKey
    generation: Generation
    reason: RejectReason
    message: str = ""


class LeaseRenew(StrictModel):
    """The agent asks to keep its lease; it counts the lease from when it sent this."""

    type: Literal["LeaseRenew"] = "LeaseRenew"
    id: Annotated[int, Field(ge=1)]


class Ack(StrictModel):
    """A bare acknowledgement: the envelope's `ack` says up to which `seq`."""

    type: Literal["Ack"] = "Ack"


# --- hub → agent ----------------------------------------------------------------------------


class NamespaceLabels(StrictModel):
    """Labels the hub asserts for a namespace in every member cluster (a tenant's namespaces
    carry `multiq.dev/tenant: <tenant>`). The agent matches namespaceSelectors against the
    cluster's own labels of the namespace with these over them."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)


class ConfigSync(StrictModel):
    """The full queueing configuration for the cluster, replacing what the agent had."""

    type: Literal["ConfigSync"] = "ConfigSync"
    revision: int
    resource_flavors: list[ResourceFlavor] = Field(default_factory=list)
    cluster_queues: list[ClusterQueue] = Field(default_factory=list)
    local_queues: list[LocalQueue] = Field(default_factory=list)
    cohorts: list[Cohort] = Field(default_factory=list)
    workload_priority_classes: list[WorkloadPriorityClass] = Field(default_factory=list)
    topologies: list[Topology] = Field(default_factory=list)
    namespaces: list[NamespaceLabels] = Field(default_factory=list)
    # This cluster's MemberCluster.spec.waitForPodsReady (None: the agent's own setting).
    wait_for_pods_ready: WaitForPodsReady | None = None
    # This cluster's MemberCluster.spec.admissionFairSharing (None: the agent's own setting).
    admission_fair_sharing: AdmissionFairSharing | None = None
    # This cluster's MemberCluster.spec.fairSharing (None: the agent's own setting).
    fair_sharing: FairSharing | None = None

    def objects(self) -> Iterator[tuple[str, int, Object]]:
        """(field, index, object) for every object carried."""
        groups: tuple[tuple[str, Sequence[Object]], ...] = (
            ("resourceFlavors", self.resource_flavors),
            ("clusterQueues", self.cluster_queues),
            ("localQueues", self.local_queues),
            ("cohorts", self.cohorts),
            ("workloadPriorityClasses", self.workload_priority_classes),
            ("topologies", self.topologies),
        )
        for field_name, objs in groups:
            for i, obj in enumerate(objs):
                yield field_name, i, obj


class DispatchOffer(StrictModel):
    """Admit this workload. `bound`: the hub bound it to this cluster already, so admitting
    means creating its objects; otherwise a reservation request: admitting means holding its
    quota, creating nothing, reporting Reserved and waiting for `Bind` — for at most
    `reservationTimeoutSeconds`, after which the agent releases it itself (Withdrawn,
    ReservationExpired). `source` is the object the user submitted (a batch/v1 Job or a
    JobSet, wire form) that the agent creates; None when the user submitted a Workload
    directly, in which case the agent runs one Indexed Job per pod set. The workload comes
    without its status (the agent gives it its own); one from an older hub, with the hub's
    status, is taken and that status ignored."""

    type: Literal["DispatchOffer"] = "DispatchOffer"
    workload: Workload
    generation: Generation
    source: dict[str, Any] | None = None
    bound: bool = True
    reservation_timeout_seconds: Annotated[int, Field(ge=1)] = 30


class Bind(StrictModel):
    """The hub bound this workload's generation to this cluster: materialise its
    reservation. For a workload the agent does not hold, it answers Withdrawn."""

    type: Literal["Bind"] = "Bind"
    workload: WorkloadKey
    generation: Generation


class LeaseGrant(StrictModel):
    """The answer to `LeaseRenew(id)`: the agent may run bound work until `leaseSeconds`
    after it sent that renewal. `enabled` False: fencing is off for this cluster (no
    self-fencing, no Job deadlines); the hub then never re-dispatches its bound work alone."""

    type: Literal["LeaseGrant"] = "LeaseGrant"
    id: Annotated[int, Field(ge=1)]
    lease_seconds: Annotated[int, Field(ge=1)]
    grace_seconds: Annotated[int, Field(ge=1)]
    enabled: bool = True


class Withdraw(StrictModel):
    """Stop the workload and release it (the hub may dispatch it elsewhere afterwards)."""

    type: Literal["Withdraw"] = "Withdraw"
    workload: WorkloadKey
    generation: Generation
    reason: str
    message: str = ""


class Cancel(StrictModel):
    """The user cancelled the workload: delete its objects for good."""

    type: Literal["Cancel"] = "Cancel"
    workload: WorkloadKey
    generation: Generation
    reason: str
    message: str = ""


class LogOpen(StrictModel):
    type: Literal["LogOpen"] = "LogOpen"
    stream_id: str
    workload: WorkloadKey
    follow: bool = False
    since: datetime | None = None
    since_seconds: int | None = None
    tail_lines: int | None = None
    pod: str | None = None
    container: str | None = None
    timestamps: bool = True


class LogClose(StrictModel):
    type: Literal["LogClose"] = "LogClose"
    stream_id: str
    reason: str = ""


Payload = Annotated[
    Hello
    | CapacityReport
    | WorkloadStatusReport
    | LogData
    | OfferRejected
    | LeaseRenew
    | Ack
    | ConfigSync
    | DispatchOffer
    | Bind
    | LeaseGrant
    | Withdraw
    | Cancel
    | LogOpen
    | LogClose,
    Field(discriminator="type"),
]


class TraceContext(StrictModel):
    """W3C trace context headers (https://www.w3.org/TR/trace-context/)."""

    traceparent: str
    tracestate: str | None = None


class Envelope(StrictModel):
    protocol_version: int = PROTOCOL_VERSION
    type: MessageType
    seq: Annotated[int, Field(ge=0)]
    ack: Annotated[int, Field(ge=0)] | None = None
    trace_context: TraceContext | None = None
    payload: Payload

    # Senders may omit payload.type: the envelope's type is the discriminator. That is done
    # around the schema, not by a validator in it: a model validator of mode "before" makes
    # pydantic turn a JSON text into Python objects before validating them, which cost every
    # message a quarter to two fifths of its decoding (a LogData batch the most).

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        return super().model_validate(_with_payload_type(obj), **options)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        try:
            return super().model_validate_json(json_data, **options)
        except ValidationError as exc:
            if not any(
                e["type"] == "union_tag_not_found" and e["loc"] == ("payload",)
                for e in exc.errors()
            ):
                raise
        # The payload names no type: the envelope's. The text parsed (else the error would
        # say so), and parses alike again with the same parser.
        return cls.model_validate(from_json(json_data), **options)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise ValueError(
                f"unsupported protocol version {self.protocol_version}; this side speaks "
                f"{sorted(SUPPORTED_PROTOCOL_VERSIONS)}"
            )
        if self.payload.type != self.type:
            raise ValueError(f"payload type {self.payload.type} does not match type {self.type}")
        if self.type is MessageType.ACK and self.ack is None:
            raise ValueError("an Ack must carry `ack`")
        return self

    @classmethod
    def wrap(
        cls,
        payload: Payload,
        *,
        seq: int,
        ack: int | None = None,
        trace_context: TraceContext | None = None,
    ) -> Envelope:
        if seq < 0 or (ack is not None and ack < 0):
            raise ValueError("seq and ack are never negative")
        if isinstance(payload, Ack) and ack is None:
            raise ValueError("an Ack must carry `ack`")
        # Built, not validated: the payload is a validated model already, and its type
        # makes the envelope's. Validating it again cost a sender more than encoding it.
        return cls.model_construct(
            type=MessageType(payload.type),
            seq=seq,
            ack=ack,
            trace_context=trace_context,
            payload=payload,
        )

    def to_json(self, encoded: Mapping[str, str] | None = None) -> str:
        """The message as JSON. `encoded`: members of the payload, by field name, that the
        sender has as JSON already and that are written as they are (the hub's offers carry
        a workload and a submitted Job its store encoded, pod templates and all); each text
        must decode to the member's value."""
        if not encoded:
            return self.model_dump_json(by_alias=True, exclude_none=True)
        # The rest as pydantic writes it. Both dumps are objects with members (the payload
        # has its type), so their braces can be opened and the given members put in.
        head = self.model_dump_json(by_alias=True, exclude_none=True, exclude={"payload"})
        rest = self.payload.model_dump_json(by_alias=True, exclude_none=True, exclude=set(encoded))
        aliases = type(self.payload).model_fields
        given = "".join(
            f'"{aliases[name].alias or name}":{text},' for name, text in encoded.items()
        )
        return f'{head[:-1]},"payload":{{{given}{rest[1:]}}}'

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Parse and validate; raises pydantic.ValidationError (see
        api.codec.pydantic_errors_to_field_errors for field errors)."""
        return cls.model_validate_json(text)

    @classmethod
    def decode(cls, text: str | bytes) -> Envelope:
        """Parse and fully validate (schema, then the rules of the objects carried); raises
        `MessageInvalidError` with every field error."""
        try:
            envelope = cls.model_validate_json(text)
        except ValidationError as exc:
            raise MessageInvalidError(message_field_errors(exc)) from exc
        errors = envelope.semantic_errors()
        if errors:
            raise MessageInvalidError(errors)
        return envelope

    @classmethod
    def decode_from_peer(cls, text: str | bytes) -> tuple[Envelope, tuple[str, ...]]:
        """`decode` for a message off the wire, tolerant of a newer peer: fields this side's
        models do not know are dropped, and their paths returned for the caller to log.

        Within one protocol version, messages only gain optional fields (docs/protocol.md),
        so a hub and its agents can be upgraded in any order: an older side ignores what it
        does not know yet, as Kubernetes clients do. Anything else invalid still raises
        `MessageInvalidError`; a message whose only faults are unknown fields costs a second
        parse, and only then."""
        try:
            return cls.decode(text), ()
        except MessageInvalidError as exc:
            strict = exc
        try:
            cls.model_validate_json(text)
        except ValidationError as exc:
            errors = exc.errors()
            if not errors or any(e["type"] != "extra_forbidden" for e in errors):
                raise strict from None
            data = json.loads(text)
            dropped = tuple(_drop(data, e["loc"]) for e in errors)
        else:
            raise strict  # the schema was fine: the carried objects broke their rules
        try:
            envelope = cls.model_validate(data)
        except ValidationError as exc:
            raise MessageInvalidError(message_field_errors(exc)) from exc
        errors_left = envelope.semantic_errors()
        if errors_left:
            raise MessageInvalidError(errors_left)
        return envelope, dropped

    def semantic_errors(self) -> list[FieldError]:
        """The rules of the objects carried (configuration, offered workload) and of the
        message itself, with paths from the envelope (e.g. `payload.clusterQueues[0].spec…`)."""
        errors: list[FieldError] = []
        payload = self.payload
        base = Path("payload")
        if isinstance(payload, ConfigSync):
            for field_name, i, obj in payload.objects():
                prefix = str(base.child(field_name).index(i))
                errors += [
                    FieldError(e.type, f"{prefix}.{e.path}", e.detail, e.value, e.has_value)
                    for e in obj.semantic_errors()
                ]
            for i, ns in enumerate(payload.namespaces):
                at = base.child("namespaces").index(i)
                errors += dns1123_label_errors(at.child("name"), ns.name)
                errors += label_map_errors(at.child("labels"), ns.labels)
        elif isinstance(payload, DispatchOffer):
            prefix = str(base.child("workload"))
            errors += [
                FieldError(e.type, f"{prefix}.{e.path}", e.detail, e.value, e.has_value)
                for e in payload.workload.semantic_errors()
            ]
        elif isinstance(payload, Hello | CapacityReport | LogData):
            errors += dns1123_subdomain_errors(base.child("cluster"), payload.cluster)
        elif isinstance(payload, LogOpen):
            if payload.since is not None and payload.since_seconds is not None:
                errors.append(
                    FieldError.forbidden(
                        base.child("sinceSeconds"), "may not be set together with since"
                    )
                )
            for name, value in (
                ("sinceSeconds", payload.since_seconds),
                ("tailLines", payload.tail_lines),
            ):
                if value is not None and value < 0:
                    errors.append(
                        FieldError.invalid(
                            base.child(name), value, "must be greater than or equal to 0"
                        )
                    )
        return errors


def _with_payload_type(data: Any) -> Any:
    """An envelope's data with its payload typed by the envelope's type where the sender
    left the payload's out (a copy; anything else as it is)."""
    if isinstance(data, dict):
        payload = data.get("payload")
        if isinstance(payload, dict) and "type" not in payload and "type" in data:
            return {**data, "payload": {**payload, "type": data["type"]}}
    return data


class MessageInvalidError(ApiError):
    """A message broke the schema or the rules of what it carries; `errors` has them all."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("invalid message: " + "; ".join(str(e) for e in self.errors))


def _drop(data: Any, loc: tuple[int | str, ...]) -> str:
    """Remove the unknown field at pydantic's `loc` from `data`; its dotted path. A `loc`
    names the payload's union member (`payload.LogClose.bogus`), which the data has not."""
    node, path = data, []
    for i, step in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and isinstance(step, str) and step not in node and not last:
            continue  # the union tag
        if last:
            if isinstance(node, dict):
                node.pop(step, None)
            path.append(str(step))
            break
        node = node[step]
        path.append(f"[{step}]" if isinstance(step, int) else str(step))
    return ".".join(path).replace(".[", "[")


def message_field_errors(exc: ValidationError) -> list[FieldError]:
    """pydantic's errors as field errors, without the payload's union tag in the path
    (`payload.LogClose.bogus` becomes `payload.bogus`)."""
    tags = tuple(f"payload.{t.value}" for t in MessageType)
    out = []
    for error in pydantic_errors_to_field_errors(exc):
        fixed = error
        for tag in tags:
            rest = error.path[len(tag) :]
            if error.path.startswith(tag) and (rest == "" or rest[0] in ".["):
                fixed = replace(error, path="payload" + rest)
                break
        out.append(fixed)
    return out
