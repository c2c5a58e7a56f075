"""One record per held workload, and every decision about it as a pure function.

A `Record` is all the agent knows of one workload it holds: the offer as received, the
workload with the status the agent gave it (its admission), where it is (`phase`), whether the
hub bound it here (`bound`), the Jobs made for it, the last report sent and the timers that
are running for it. Forgetting a workload is deleting its record; nothing else is kept per
workload (the shell's indexes are derived from the records).

Each transition takes the record (None: not held), the fact and `now`, and returns a `Step`:
the new record (None: forget it) and the effects the shell applies, in order — report this,
reject that, materialise, stop the Jobs, persist. The transitions read no clock and do no
I/O. The phases a record goes through (docs/exactly-once.md):

    Pending ──engine admits, bound──────────────► Admitted ─► Running ─► Succeeded / Failed
       │                                             ▲
       └──engine admits, not bound──► Reserved ──Bind┘      (any of them: evicted, withdrawn,
                                         └─ no Bind in time: released    fenced → given back)

A generation given back (Evicted, Withdrawn) is kept as a settled record, as a finished one
is, for the finished TTL: listed in Hello with that phase, its report sent again if the hub
offers or binds that generation again — never run again. The hub may re-offer it before the
report reached it (a reconnect, a restarted hub), and running it then would run it twice.

Called by: agent.admission (the shell that feeds the facts in and applies the effects);
agent.snapshots reads the records; tests/agent/test_records.py drives every transition.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_json

from agent.engine.result import PendingCode, PendingReason, Unblock
from agent.status import Observation, report_changed
from api.meta import Condition
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    DispatchOffer,
    Envelope,
    MessageInvalidError,
    OfferRejected,
    RejectReason,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission, EvictedReason, Workload, WorkloadStatus

__all__ = [
    "NOT_HELD",
    "RESERVATION_EXPIRED",
    "Cadence",
    "Effect",
    "LogShip",
    "Materialize",
    "Persist",
    "Record",
    "Reject",
    "Report",
    "Sighting",
    "Step",
    "StopJobs",
    "awaits_jobs",
    "next_report",
    "observable",
    "on_bind",
    "on_engine_admit",
    "on_evict",
    "on_fence",
    "on_materialize_failed",
    "on_materialized",
    "on_offer",
    "on_pending",
    "on_timer",
    "on_withdraw",
    "pending_report_due",
    "reason_reported",
    "rejection",
    "wakeup",
    "with_preempting",
]

RESERVATION_EXPIRED = "ReservationExpired"
"""Why a reservation the hub did not bind in time was released (a Withdrawn report)."""
NOT_HELD = "NotHeld"
"""Why a Bind for a workload (generation) this agent does not hold is answered Withdrawn."""

_FINISHED = frozenset({WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED})
_GIVEN_BACK = frozenset({WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN})
_MATERIALISED = frozenset({WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING, *_FINISHED})
_NEVER_HERE = frozenset({PendingCode.LOCAL_QUEUE_NOT_FOUND, PendingCode.CLUSTER_QUEUE_NOT_FOUND})
_REASON_CHARS = re.compile(r"[^A-Za-z0-9_,:]")


@dataclass(frozen=True, slots=True)
class Cadence:
    """How often reports go and how long things wait, in seconds (the agent's Timings)."""

    status_interval: float = 1.0
    """At most one report this often when only pod counts change, or when a Job starts."""
    pending_refresh: float = 30.0
    """At most one Pending report this often when only its message changes."""
    finished_ttl: float = 3600.0
    """How long a finished workload stays held."""
    settle: float = 5.0
    """At most this long a finished workload's last report waits for its pods to catch up."""


@dataclass(frozen=True, slots=True)
class Record:
    """A workload this cluster holds. Immutable: every transition returns a new one."""

    key: str
    """namespace/name: how the hub and the agent name the workload."""
    offer: DispatchOffer
    """As received (its workload without status): what is persisted once and re-planned."""
    workload: Workload
    """The offer's workload with the status the agent gave it (admission, conditions); a
    new object on every change, so the snapshot cache can key on its identity."""
    phase: WorkloadPhase = WorkloadPhase.PENDING
    bound: bool = True
    """The hub bound it to this cluster: admitting it means creating its Jobs."""
    offered_at: float = 0.0
    reserved_at: float | None = None
    """When the engine admitted it as a reservation (phase Reserved, not bound yet)."""
    job_names: tuple[str, ...] = ()
    """The Jobs materialisation made (empty until they all exist)."""
    jobs_seen: bool = False
    """The inventory has shown its Jobs, so their absence means someone deleted them."""
    preempting: bool = False
    """The engine started preempting for it (sticky until it is admitted)."""
    last_report: WorkloadStatusReport | None = None
    pending_reported_at: float = 0.0
    finished_at: float | None = None
    settling_since: float | None = None
    """Finished per its Jobs, waiting for its pods to show it too: since when."""
    unreported_since: float | None = None
    """Admitted here (bound) then, and not reported yet: the report waits (at most
    `status_interval`) for its pods to start, so that one report says both (`next_report`);
    capacity reports meanwhile list it (their usage counts it)."""
    look_again_at: float | None = None
    """Look at its Jobs and pods again at this time even if nothing of theirs changes (a
    report held back, pods settling, Jobs made before their names were known)."""
    jobset_attempts: tuple[tuple[str, int], ...] = ()
    """A JobSet's Jobs restarted so far, each with its restart attempt (agent.jobsets)."""
    jobset_restarts: int = 0
    """Restarts counted against the JobSet's maxRestarts."""

    @property
    def generation(self) -> int:
        return self.offer.generation

    @property
    def finished(self) -> bool:
        return self.phase in _FINISHED

    @property
    def given_back(self) -> bool:
        """Evicted or withdrawn here: this generation must not run here again."""
        return self.phase in _GIVEN_BACK

    @property
    def settled(self) -> bool:
        """Finished, or given back: it holds no quota and runs nothing here any more."""
        return self.phase in _FINISHED or self.phase in _GIVEN_BACK

    # persistence -----------------------------------------------------------------------------

    def offer_json(self) -> str:
        """The offer encoded, as persisted when the text it came in is not at hand
        (`from_json` reads either)."""
        return self.offer.model_dump_json(by_alias=True, exclude_none=True)

    def state_json(self) -> str:
        # pydantic_core's encoder: the status model goes in as it is, no dict made first.
        state: dict[str, object] = {
            "generation": self.generation,
            "phase": self.phase.value,
            "bound": self.bound,
            "offeredAt": self.offered_at,
            "reservedAt": self.reserved_at,
            "jobNames": self.job_names,
            "status": self.workload.status,
        }
        if self.jobset_attempts or self.jobset_restarts:
            state["jobsetAttempts"] = dict(self.jobset_attempts)
            state["jobsetRestarts"] = self.jobset_restarts
        return to_json(state, by_alias=True, exclude_none=True).decode()

    @classmethod
    def from_json(cls, offer_text: str, state_text: str) -> Record:
        """A record as persisted. One admitted but not materialised when the agent stopped
        comes back Pending: it is admitted again, and the Jobs it may have got are adopted."""
        state = json.loads(state_text)
        offer = _persisted_offer(offer_text, float(state.get("offeredAt", 0.0)))
        if state.get("generation") != offer.generation:
            raise ValueError("state and offer disagree on the generation")
        phase = WorkloadPhase(state["phase"])
        job_names = tuple(state.get("jobNames") or ())
        status = state.get("status")
        if phase is WorkloadPhase.ADMITTED and not job_names:
            phase, status = WorkloadPhase.PENDING, None
        workload = offer.workload.model_copy(
            update={"status": None if status is None else WorkloadStatus.model_validate(status)}
        )
        meta = offer.workload.metadata
        reserved_at = state.get("reservedAt")
        return cls(
            key=f"{meta.namespace or 'default'}/{meta.name}",
            offer=offer,
            workload=workload,
            phase=phase,
            bound=bool(state.get("bound", True)),
            offered_at=float(state.get("offeredAt", 0.0)),
            reserved_at=None if reserved_at is None else float(reserved_at),
            job_names=job_names,
            jobset_attempts=tuple(
                (str(k), int(v)) for k, v in (state.get("jobsetAttempts") or {}).items()
            ),
            jobset_restarts=int(state.get("jobsetRestarts") or 0),
        )


def _persisted_offer(text: str, offered_at: float) -> DispatchOffer:
    """The offer of a persisted record: either the envelope it came in, taken in again as
    `on_offer` took it when it came (at `offered_at`), or the offer as the record held it."""
    if "payload" not in json.loads(text):
        return DispatchOffer.model_validate_json(text)
    try:
        envelope, _ = Envelope.decode_from_peer(text)
    except MessageInvalidError as exc:
        raise ValueError(str(exc)) from exc
    offer = envelope.payload
    if not isinstance(offer, DispatchOffer):
        raise ValueError(f"the persisted offer is a {envelope.type.value} message")
    return _as_held(offer, offered_at)


# effects ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Report:
    """Send this status report to the hub (through the outbox)."""

    payload: WorkloadStatusReport


@dataclass(frozen=True, slots=True)
class Reject:
    """Send this rejection of an offer to the hub."""

    payload: OfferRejected


@dataclass(frozen=True, slots=True)
class Materialize:
    """Create the record's Jobs (then `on_materialized` or `on_materialize_failed`)."""


class LogShip(enum.Enum):
    """How a stop ships the workload's logs the hub does not have yet (docs/logs.md)."""

    NONE = "none"
    """A withdrawal, a fence or a generation given back: prompt, one running copy
    (docs/exactly-once.md); the hub would not take the lines from this cluster anyway."""
    BEFORE = "before"
    """A cancel: shipped first (in the background, bounded), then the Jobs go."""
    ALONGSIDE = "alongside"
    """An eviction or a preemption: the ship's reads are opened first (a tight bound), then
    the Jobs go at once — the quota is another workload's the moment it is given back — and
    the ship reads on from the terminating pods; the Evicted report follows it (bounded)."""


@dataclass(frozen=True, slots=True)
class StopJobs:
    """Delete the workload's Jobs: these, when all of them are known; () — whatever Jobs of
    the workload the cluster has (any generation)."""

    job_names: tuple[str, ...] = ()
    logs: LogShip = LogShip.NONE
    """Whether and how the logs the hub does not have yet are shipped with the stop."""


@dataclass(frozen=True, slots=True)
class Persist:
    """Save the record at the end of the pass (`with_offer`: its offer too — as
    `offer_text`, the text of the envelope it came in, when given: encoding the offer again
    would cost about what decoding it did)."""

    with_offer: bool = False
    offer_text: str | None = None


Effect = Report | Reject | Materialize | StopJobs | Persist


@dataclass(frozen=True, slots=True)
class Step:
    """A transition's outcome: the record from now on (None: forget it), and the effects."""

    record: Record | None
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True, slots=True)
class Sighting:
    """What one status pass saw of a workload's objects."""

    observation: Observation
    jobs_exist: bool
    """Some of its Jobs are in the inventory."""
    relisted: bool = False
    """The inventory was just listed (after a restart): a Job missing now is really gone."""


# helpers ---------------------------------------------------------------------------------------


def _at(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def condition_reason(text: str) -> str:
    """`text` as a condition reason (CamelCase letters, digits, `_,:`)."""
    cleaned = _REASON_CHARS.sub("", text) or "Unknown"
    return cleaned if cleaned[0].isalpha() else "R" + cleaned


def _report(
    record: Record,
    phase: WorkloadPhase,
    now: float,
    *,
    workload: Workload | None = None,
    **fields: Any,
) -> Report:
    """A report of `record` (with `workload` in place of its own, when given)."""
    status = (workload or record.workload).status
    return Report(
        WorkloadStatusReport.model_validate(
            {
                "workload": record.key,
                "generation": record.generation,
                "phase": phase,
                "observed_at": _at(now),
                "admission": status.admission if status else None,
                **fields,
            }
        )
    )


def _given_back(
    key: str,
    generation: int,
    phase: WorkloadPhase,
    reason: str,
    message: str,
    now: float,
    preempted: str | None = None,
) -> Report:
    """Evicted or Withdrawn: the hub reads the why of any phase from pending_reason/message.
    A preemption also carries Kueue's Preempted condition, whose reason says which rule
    chose the victim (InClusterQueue, InCohortReclamation, …)."""
    why = [("Evicted", reason)] + ([("Preempted", preempted)] if preempted is not None else [])
    conditions = [
        Condition(
            type=type_,
            status="True",
            reason=condition_reason(cause),
            message=message,
            last_transition_time=_at(now),
        )
        for type_, cause in why
    ]
    return Report(
        WorkloadStatusReport(
            workload=key,
            generation=generation,
            phase=phase,
            observed_at=_at(now),
            pending_reason=reason,
            pending_message=message,
            conditions=conditions,
        )
    )


def _reject(key: str, generation: int, reason: RejectReason, message: str) -> Reject:
    return Reject(
        OfferRejected(workload=key, generation=generation, reason=reason, message=message)
    )


def _settle_given_back(record: Record, report: Report, now: float) -> Record:
    """What is kept of a generation given back (see the module docstring)."""
    return replace(
        record,
        phase=report.payload.phase,
        job_names=(),
        preempting=False,
        reserved_at=None,
        settling_since=None,
        look_again_at=None,
        last_report=report.payload,
        finished_at=now,
    )


def _resend(record: Record) -> Step:
    """A redelivered message: say again where the workload is."""
    last = record.last_report
    return Step(record, () if last is None else (Report(last),))


def _stop(record: Record, *, logs: LogShip = LogShip.NONE) -> tuple[Effect, ...]:
    """Stopping what the record made: nothing before it was bound and admitted."""
    if record.phase not in _MATERIALISED:
        return ()
    return (StopJobs(record.job_names, logs=logs),)


def rejection(reason: PendingReason) -> RejectReason | None:
    """The rejection a pending reason amounts to, or None when waiting may help."""
    if reason.code in _NEVER_HERE:
        return RejectReason.NO_SUCH_QUEUE
    if reason.unblock is Unblock.QUOTA_CHANGED:
        return RejectReason.INADMISSIBLE
    return None


def pending_report_due(
    last: WorkloadStatusReport | None,
    reason: PendingReason,
    last_reported_at: float,
    now: float,
    refresh: float,
) -> bool:
    """Whether a pending workload's reason must be reported now. A new phase or reason code
    is reported at once; a new message for the same code (its amounts move with every
    admission in the queue) at most every `refresh` seconds, or a deep queue would send a
    report per pending workload per cycle and the hub would store them all."""
    if last is None or last.phase is not WorkloadPhase.PENDING:
        return True
    if last.pending_reason != reason.code:  # (a StrEnum: equal to its reported string)
        return True
    return last.pending_message != reason.message and now - last_reported_at >= refresh


def reason_reported(record: Record, reason: PendingReason) -> bool:
    """Whether the record's last report says exactly this reason (then only a new reason
    can make `pending_report_due` report again)."""
    last = record.last_report
    return (
        last is not None
        and last.phase is WorkloadPhase.PENDING
        and last.pending_reason == reason.code
        and last.pending_message == reason.message
    )


def wakeup(record: Record, cadence: Cadence) -> float | None:
    """When `on_timer` has something to do for the record (None: nothing, ever)."""
    times = []
    if record.look_again_at is not None:
        times.append(record.look_again_at)
    if record.phase is WorkloadPhase.RESERVED and record.reserved_at is not None:
        times.append(record.reserved_at + record.offer.reservation_timeout_seconds)
    if record.finished_at is not None:
        times.append(record.finished_at + cadence.finished_ttl)
    return min(times) if times else None


def observable(record: Record) -> bool:
    """Whether a status pass looks at the record: it has Jobs and is not finished."""
    return bool(record.job_names) and record.phase in (
        WorkloadPhase.ADMITTED,
        WorkloadPhase.RUNNING,
    )


def awaits_jobs(record: Record | None, started: Record) -> bool:
    """Whether the record a materialisation was started for (`started`) still waits for its
    Jobs: held, not withdrawn, re-offered, or given Jobs meanwhile."""
    return (
        record is not None
        and record.offer is started.offer
        and not record.job_names
        and record.phase is WorkloadPhase.ADMITTED
    )


def with_preempting(record: Record, preempting: bool) -> Record:
    return record if record.preempting is preempting else replace(record, preempting=preempting)


# hub messages ----------------------------------------------------------------------------------


def on_offer(
    record: Record | None, offer: DispatchOffer, now: float, received: str | None = None
) -> Step:
    """A DispatchOffer (`received`: the text of the envelope it came in, persisted as it is).
    An older generation than the held one is rejected; the held one again (redelivered)
    re-sends the latest report — and binds a held reservation when the hub has bound it
    meanwhile; a newer one replaces the held one once its Jobs are stopped."""
    meta = offer.workload.metadata
    key = f"{meta.namespace or 'default'}/{meta.name}"
    stop: tuple[Effect, ...] = ()
    if record is not None:
        if record.generation > offer.generation:
            message = f"generation {record.generation} is held"
            return Step(
                record, (_reject(key, offer.generation, RejectReason.STALE_GENERATION, message),)
            )
        if record.generation == offer.generation:
            if record.settled:
                return _resend(record)  # given back or finished: never run again
            if offer.bound and not record.bound:
                return on_bind(record, Bind(workload=key, generation=offer.generation), now)
            return _resend(record)
        stop = () if record.settled and not record.finished else (_stop(record) or (StopJobs(),))
    held_offer = _as_held(offer, now)
    held = Record(
        key=key,
        offer=held_offer,
        workload=held_offer.workload,
        bound=offer.bound,
        offered_at=now,
    )
    return Step(held, (*stop, Persist(with_offer=True, offer_text=received)))


def _as_held(offer: DispatchOffer, now: float) -> DispatchOffer:
    """The offer as a record holds it, taken at `now`: its workload without status (an older
    hub sent its own), with a creation time and a uid."""
    meta = offer.workload.metadata
    key = f"{meta.namespace or 'default'}/{meta.name}"
    # The offer was decoded for this agent alone (nothing else holds it): no deep copy.
    workload = offer.workload.model_copy()
    workload.status = None
    if workload.metadata.creation_timestamp is None:
        workload.metadata = workload.metadata.model_copy(update={"creation_timestamp": _at(now)})
    if not workload.metadata.uid:
        # The hub gives every Workload a uid; without one, a stable stand-in (it must be a
        # valid label value, and the same for every generation of the workload).
        uid = hashlib.sha256(key.encode()).hexdigest()[:36]
        workload.metadata = workload.metadata.model_copy(update={"uid": uid})
    return offer.model_copy(update={"workload": workload})


def on_bind(record: Record | None, bind: Bind, now: float) -> Step:
    """The hub bound the workload here. A reservation is materialised; a workload still
    pending is marked bound (it materialises when admitted); a bound one re-sends its latest
    report. One not held at that generation is answered Withdrawn (NotHeld), so the hub
    unbinds it and queues it again; a Bind older than the held generation is stale."""
    if record is not None and record.generation > bind.generation:
        return Step(record)
    if record is None or record.generation < bind.generation:
        held = "nothing" if record is None else f"generation {record.generation}"
        message = f"bound to generation {bind.generation}, but this cluster holds {held}"
        return Step(
            record,
            (
                _given_back(
                    bind.workload, bind.generation, WorkloadPhase.WITHDRAWN, NOT_HELD, message, now
                ),
            ),
        )
    if record.bound or record.settled:
        return _resend(record)
    if record.phase is WorkloadPhase.RESERVED:
        bound = replace(
            record,
            bound=True,
            phase=WorkloadPhase.ADMITTED,
            reserved_at=None,
            unreported_since=now,
        )
        return Step(bound, (Materialize(), Persist()))
    return Step(replace(record, bound=True), (Persist(),))


def on_withdraw(record: Record | None, message: Withdraw | Cancel, now: float) -> Step:
    """The hub takes the workload back (Withdraw) or the user cancelled it (Cancel): stop its
    Jobs, report Withdrawn, keep the generation as given back (a repeated Withdraw repeats
    its report). A message about an older generation is ignored. Jobs of a workload not
    held are deleted too (the agent may have lost track of them)."""
    if record is not None and record.generation > message.generation:
        return Step(record)
    text = message.message or f"{message.type} by the hub"
    reason = message.reason or message.type
    report = _given_back(
        message.workload, message.generation, WorkloadPhase.WITHDRAWN, reason, text, now
    )
    if record is None:
        return Step(None, (StopJobs(), report))
    if record.phase in _GIVEN_BACK and record.generation == message.generation:
        return Step(record, (Report(record.last_report),) if record.last_report else ())
    kept = _settle_given_back(record, report, now)
    logs = LogShip.BEFORE if isinstance(message, Cancel) else LogShip.NONE
    return Step(kept, (*_stop(record, logs=logs), report, Persist()))


def on_fence(record: Record, message: str, now: float) -> Step:
    """The lease ran out: everything not settled is stopped and given back (ClusterLost)."""
    if record.settled:
        return Step(record)
    return on_evict(record, EvictedReason.CLUSTER_LOST.value, message, now, logs=LogShip.NONE)


# the engine ------------------------------------------------------------------------------------


def on_engine_admit(record: Record, admission: Admission, now: float) -> Step:
    """The engine admitted the workload: its quota is held from now on. Bound, it is
    materialised (reported Admitted once its Jobs exist); not bound, it is a reservation:
    nothing is created, and Reserved goes to the hub with the admission."""
    status = WorkloadStatus(
        admission=admission,
        conditions=[
            Condition(
                type="QuotaReserved",
                status="True",
                reason="QuotaReserved",
                message=f"Quota reserved in ClusterQueue {admission.cluster_queue}",
                last_transition_time=_at(now),
            ),
            # Not a loss of readiness: the engine times waitForPodsReady from admission.
            Condition(
                type=PODS_READY,
                status="False",
                reason="PodsNotReady",
                message="not all pods are ready or succeeded yet",
                last_transition_time=_at(now),
            ),
        ],
    )
    workload = record.workload.model_copy(update={"status": status})
    if record.bound:
        admitted = replace(
            record,
            workload=workload,
            phase=WorkloadPhase.ADMITTED,
            job_names=(),
            preempting=False,
            unreported_since=now,
        )
        return Step(admitted, (Materialize(),))
    report = _report(record, WorkloadPhase.RESERVED, now, workload=workload)
    reserved = replace(
        record,
        workload=workload,
        phase=WorkloadPhase.RESERVED,
        reserved_at=now,
        preempting=False,
        last_report=report.payload,
    )
    return Step(reserved, (report,))


def on_pending(record: Record, reason: PendingReason, now: float, cadence: Cadence) -> Step:
    """The engine left the workload waiting: rejected when waiting cannot help, else its
    reason reported when due (`pending_report_due`)."""
    if record.phase is not WorkloadPhase.PENDING:
        return Step(record)
    rejected = rejection(reason)
    if rejected is not None:
        return Step(None, (_reject(record.key, record.generation, rejected, reason.message),))
    if not pending_report_due(
        record.last_report, reason, record.pending_reported_at, now, cadence.pending_refresh
    ):
        return Step(record)
    report = _report(
        record,
        WorkloadPhase.PENDING,
        now,
        pending_reason=reason.code.value,
        pending_message=reason.message,
    )
    return Step(replace(record, last_report=report.payload, pending_reported_at=now), (report,))


def on_evict(
    record: Record,
    reason: str,
    message: str,
    now: float,
    *,
    logs: LogShip = LogShip.ALONGSIDE,
    preempted: str | None = None,
) -> Step:
    """Preempted, evicted by the engine, or fenced: stop its Jobs, report Evicted (a
    reservation too — the hub then queues it again), keep the generation as given back.
    Its logs are shipped alongside the stop, never before it: the generation's quota is free
    the moment it is given back, and a preemptor must not start beside a victim still
    running (a fence ships nothing: `LogShip.NONE`). `preempted`: the engine's preemption
    reason, when a preemption is why."""
    report = _given_back(
        record.key, record.generation, WorkloadPhase.EVICTED, reason, message, now, preempted
    )
    kept = _settle_given_back(record, report, now)
    return Step(kept, (*_stop(record, logs=logs), report, Persist()))


# materialisation -------------------------------------------------------------------------------


def on_materialized(record: Record, job_names: tuple[str, ...]) -> Step:
    """Its Jobs exist: saved. The status pass that applies this looks at the record at once
    (agent.status_pass; the Jobs may be mirrored already, their names unknown till now), and
    its look is part of the same record change. Admitted is not reported here: the status
    passes report it (`next_report`), with Running when the pods start soon enough."""
    return Step(replace(record, job_names=job_names), (Persist(),))


JOBS_FORBIDDEN = "JobsForbidden"


def on_materialize_denied(record: Record, message: str, now: float) -> Step:
    """The cluster refused the agent the right to make its Jobs (403: a rule its ClusterRole
    lacks). Not the workload's fault, and an operator can fix it: it stays admitted, holding
    its quota, and says why (reported Admitted with the reason) until a later try works."""
    report = _report(
        record,
        WorkloadPhase.ADMITTED,
        now,
        pending_reason=JOBS_FORBIDDEN,
        pending_message=(
            f"the agent may not create this workload's Jobs: {message} (a rule its ClusterRole "
            "lacks; it tries again)"
        ),
    )
    reported = replace(record, last_report=report.payload, unreported_since=None)
    return Step(reported, (report,))


def on_materialize_failed(record: Record, message: str) -> Step:
    """Its Jobs cannot be made here (a conflict, an invalid source): rejected, forgotten."""
    return Step(None, (_reject(record.key, record.generation, RejectReason.INVALID, message),))


# timers ----------------------------------------------------------------------------------------


def on_timer(record: Record, now: float, cadence: Cadence) -> Step:
    """A record's `wakeup` has come. A finished workload past its TTL is forgotten; a
    reservation the hub did not bind in time is released (Withdrawn, ReservationExpired); a
    look-again time is cleared (the shell looks at the record in this pass)."""
    if record.finished_at is not None and now >= record.finished_at + cadence.finished_ttl:
        return Step(None)
    if (
        record.phase is WorkloadPhase.RESERVED
        and record.reserved_at is not None
        and now >= record.reserved_at + record.offer.reservation_timeout_seconds
    ):
        message = (
            f"not bound within {record.offer.reservation_timeout_seconds}s of reserving: "
            "the reservation is released"
        )
        report = _given_back(
            record.key,
            record.generation,
            WorkloadPhase.WITHDRAWN,
            RESERVATION_EXPIRED,
            message,
            now,
        )
        return Step(_settle_given_back(record, report, now), (report, Persist()))
    if record.look_again_at is not None and record.look_again_at <= now:
        return Step(replace(record, look_again_at=None))
    return Step(record)


# the status pass -------------------------------------------------------------------------------


PODS_READY = "PodsReady"


def _expected_pods(workload: Workload) -> int:
    status = workload.status
    counts = {ps.name: ps.count for ps in workload.spec.pod_sets}
    if status is None or status.admission is None:
        return sum(counts.values())
    return sum(
        a.count if a.count is not None else counts.get(a.name, 1)
        for a in status.admission.pod_set_assignments
    )


def _with_pods_ready(record: Record, obs: Observation, now: float) -> Record:
    """Its PodsReady condition as its pods now say (all admitted pods ready or succeeded):
    what the engine's waitForPodsReady times (agent.engine.podsready). A change of it is a
    new workload object, so the engine sees it."""
    status = record.workload.status
    if status is None or status.admission is None or obs.phase not in _RUNNING_PHASES:
        return record
    ready = obs.pods.ready + obs.pods.succeeded >= max(_expected_pods(record.workload), 1)
    current = next((c for c in status.conditions if c.type == PODS_READY), None)
    if current is not None and (current.status == "True") == ready:
        return record
    condition = Condition(
        type=PODS_READY,
        status="True" if ready else "False",
        reason="PodsReady" if ready else "PodsNotReady",
        message="all pods are ready or succeeded" if ready else "a pod is not ready any more",
        last_transition_time=_at(now),
    )
    conditions = [c for c in status.conditions if c.type != PODS_READY] + [condition]
    workload = record.workload.model_copy(
        update={"status": status.model_copy(update={"conditions": conditions})}
    )
    return replace(record, workload=workload)


_RUNNING_PHASES = (WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING)


def _held_back(
    record: Record, jobs_seen: bool, look_again_at: float, settling_since: float | None = None
) -> Record:
    """`record` with its report held back until `look_again_at`: the record itself when it
    says so already — the looks while a report waits change nothing, and a record that is
    not new is not written, nor looked at again by the engine's snapshot."""
    settling = record.settling_since if settling_since is None else settling_since
    if (
        record.jobs_seen is jobs_seen
        and record.look_again_at == look_again_at
        and record.settling_since == settling
    ):
        return record
    return replace(
        record, jobs_seen=jobs_seen, look_again_at=look_again_at, settling_since=settling
    )


def next_report(record: Record, seen: Sighting, now: float, cadence: Cadence) -> Step:
    """What a status pass makes of what it saw of the workload's Jobs and pods.

    Jobs seen and then gone were deleted behind the agent's back: Failed. The mirror lagging
    behind never moves a phase backwards. A Job failed by the agent's own fencing deadline is
    given back (Evicted, ClusterLost), not Failed. Jobs done before their pods show it wait
    (at most `settle`) so the final report carries every pod's count and exit. Admitted
    waits for the pods to start, at most `status_interval` after the admission, so a
    workload whose pods start soon is reported once, Running. Any other new phase is
    reported at once, except Running after a reported Admitted; a change of pod counts alone,
    or Running, at most once per `status_interval` (a Job that ends within it goes from
    Admitted straight to its end: every report is a write at the hub). A finished workload
    gets its Finished condition, is saved, and frees its quota (it leaves the snapshot)."""
    if not observable(record):
        return Step(record)
    record = _with_pods_ready(record, seen.observation, now)
    obs = seen.observation
    seen_now = record.jobs_seen or seen.jobs_exist
    deleted = not seen.jobs_exist and (record.jobs_seen or seen.relisted)
    if deleted:
        obs = Observation(
            WorkloadPhase.FAILED, obs.pods, obs.exits, "its Jobs were deleted outside MultiQ"
        )
    kept = record if seen_now is record.jobs_seen else replace(record, jobs_seen=seen_now)
    if obs.phase is WorkloadPhase.ADMITTED and record.phase is not WorkloadPhase.ADMITTED:
        return Step(kept)  # the mirror lags behind: never go backwards
    if obs.fenced:
        return on_evict(
            record, EvictedReason.CLUSTER_LOST.value, obs.message, now, logs=LogShip.NONE
        )
    if obs.phase in _FINISHED and (obs.pods.pending or obs.pods.running) and obs.message == "":
        since = record.settling_since if record.settling_since is not None else now
        if now - since < cadence.settle:
            return Step(_held_back(record, seen_now, since + cadence.settle, settling_since=since))
    last = record.last_report
    unreported = record.unreported_since
    if unreported is not None and obs.phase is WorkloadPhase.ADMITTED:
        # Pods that start within `status_interval` are reported with the admission, in one
        # report (one write at the hub); pods that take longer do not delay Admitted more.
        due = unreported + cadence.status_interval
        if now < due:
            return Step(_held_back(record, seen_now, due))
    elif not report_changed(last, obs):
        return Step(kept)
    phase_changed = obs.phase is not record.phase
    debounced = unreported is None and (
        not phase_changed
        or (obs.phase is WorkloadPhase.RUNNING and record.phase is WorkloadPhase.ADMITTED)
    )
    if debounced and last is not None and last.observed_at is not None:
        due = last.observed_at.timestamp() + cadence.status_interval
        if now < due:
            return Step(_held_back(record, seen_now, due))
    conditions = []
    workload = record.workload
    finished_at = record.finished_at
    if obs.phase in _FINISHED:
        conditions.append(
            Condition(
                type="Finished",
                status="True",
                reason=obs.phase.value,
                message=obs.message or f"the workload {obs.phase.value.lower()}",
                last_transition_time=_at(now),
            )
        )
        status = workload.status or WorkloadStatus()
        # A new status object: the snapshot cache keys on its identity.
        status = status.model_copy(update={"conditions": [*status.conditions, *conditions]})
        workload = workload.model_copy(update={"status": status})
        finished_at = now
    extra = {}
    if obs.phase is WorkloadPhase.FAILED and obs.message and (deleted or not obs.exits):
        # Why it failed, when exit codes cannot tell: there are none, or the Jobs were deleted
        # (their pods' exits, such as 143 from the SIGTERM, are the deletion's doing, and
        # whether the mirror saw them before the pods went is a race).
        extra["pending_message"] = obs.message
    report = _report(
        record,
        obs.phase,
        now,
        workload=workload,
        pods=obs.pods,
        exits=list(obs.exits),
        conditions=conditions,
        **extra,
    )
    moved = replace(
        record,
        phase=obs.phase,
        workload=workload,
        finished_at=finished_at,
        jobs_seen=seen_now,
        last_report=report.payload,
        unreported_since=None,
        # What a held-back report waited for went with this one: no look for nothing later.
        look_again_at=None,
    )
    persist = (Persist(),) if phase_changed and obs.phase in _FINISHED else ()
    return Step(moved, (report, *persist))


def on_jobset_restart(record: Record, jobs: tuple[str, ...], counted: bool) -> Step:
    """A JobSet's failure policy restarts these Jobs: each gets its next attempt (its old
    Job is then stale), and a counted restart uses one of maxRestarts."""
    attempts = dict(record.jobset_attempts)
    for name in jobs:
        attempts[name] = attempts.get(name, 0) + 1
    restarted = replace(
        record,
        jobset_attempts=tuple(sorted(attempts.items())),
        jobset_restarts=record.jobset_restarts + counted,
    )
    return Step(restarted, (Persist(),))
