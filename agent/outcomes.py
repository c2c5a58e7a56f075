"""What an admission cycle's result does to the held records, as steps (agent.records.Step).

The engine (`agent.engine.cycle.schedule`) decides over a snapshot; this turns its
`CycleResult` into the records' transitions, in the order the shell applies them:
`quota_steps` first (evictions and preemptions give quota back, admissions take it),
`waiting_steps` after (the preemptors' flags and the pending reports of who still waits).
Both are generators over the live records, and compute each step from the records as they
are when it is taken: applying the step before it may have awaited (a Job stop), and a
materialisation that finished meanwhile may have changed a record. Pure: no I/O, no clock.

Called by: agent.admission (`AdmissionShell.cycle`); tests/agent/test_outcomes.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agent import records
from agent.engine.result import CycleResult, PendingReason
from agent.engine.snapshot import WorkloadId
from agent.records import Record, Step
from agent.snapshots import api_admission
from api.v1alpha1.messages import WorkloadPhase

__all__ = ["quota_steps", "still_put_off", "to_look_at", "waiting_steps"]


def quota_steps(
    held: Mapping[str, Record], result: CycleResult, now: float
) -> Iterator[tuple[str, Step]]:
    """Evict the victims and the engine's evictions, then take the admissions (a
    reservation, or an admission if the hub bound it already)."""
    evictions: list[tuple[str, str, str, str | None]] = [
        (p.victim, "Preempted", p.message, p.reason.value) for p in result.preempted
    ]
    evictions += [(e.workload, e.reason.value, e.message, None) for e in result.evicted]
    for key, why, message, preempted in evictions:
        record = held.get(key)
        if record is not None:
            yield key, records.on_evict(record, why, message, now, preempted=preempted)
    for admit in result.admitted:
        record = held.get(admit.workload)
        if record is not None:
            yield (
                admit.workload,
                records.on_engine_admit(record, api_admission(admit.admission), now),
            )


def waiting_steps(
    held: Mapping[str, Record],
    result: CycleResult,
    now: float,
    cadence: records.Cadence,
    looked: Mapping[WorkloadId, PendingReason] | None = None,
) -> Iterator[tuple[str, Step]]:
    """Mark the new preemptors (they wait for their victims to go), then report why each
    workload still waits when a report is due, or reject it when waiting cannot help. Steps
    that change nothing are left out. Only the reasons `looked` (the cycle's `to_look_at`;
    None: those the engine names changed) are looked at."""
    for key in result.new_preemptors:
        record = held.get(key)
        if record is not None and record.phase is WorkloadPhase.PENDING:
            marked = records.with_preempting(record, True)
            if marked is not record:
                yield key, Step(marked)
    for key, reason in (to_look_at(result, {}, now) if looked is None else looked).items():
        record = held.get(key)
        if record is None or record.phase is not WorkloadPhase.PENDING:
            continue
        step = records.on_pending(record, reason, now, cadence)
        if step.record is not record or step.effects:
            yield key, step


def to_look_at(
    result: CycleResult, put_off: Mapping[str, float], now: float
) -> Mapping[WorkloadId, PendingReason]:
    """The pending reasons the pending pass must look at. Over a deep queue most are the
    last cycle's, already reported: when the engine names those that may have changed
    (`pending_changed`, with their reasons), only they and the `put_off` ones due by `now`
    can make a step. A put-off workload the engine does not name keeps the reason whose
    report the cadence held back, and that report is due only at its time: over a deep
    queue whose amounts move, looking at every one of them at every cycle until then was
    most of the pending pass. Computed once per cycle, for `waiting_steps` and
    `still_put_off` both."""
    changed = result.pending_changed
    if changed is None:
        return result.pending
    due = [key for key, at in put_off.items() if at <= now and key not in changed]
    if not due:
        return changed
    pending = result.pending
    looked = dict(changed)
    for key in due:
        reason = pending.get(WorkloadId(key))  # (one lookup: in a tail, a bisection)
        if reason is not None:
            looked[WorkloadId(key)] = reason
    return looked


def still_put_off(
    held: Mapping[str, Record],
    looked: Mapping[WorkloadId, PendingReason],
    put_off: Mapping[str, float],
    now: float,
    cadence: records.Cadence,
) -> dict[str, float]:
    """After the pending pass over `looked` (the cycle's `to_look_at` of `put_off`): the
    workloads whose reason is still not the one last reported (a new message for the same
    code, held back by the cadence), each with when its report is due. A pass from then
    looks at it again even if the engine does not name it as changed, or its report would
    never be sent. The put-off ones this pass did not look at (not due yet) stay as they
    were."""
    kept = {key: at for key, at in put_off.items() if at > now and key not in looked}
    for key, reason in looked.items():
        record = held.get(key)
        if (
            record is not None
            and record.phase is WorkloadPhase.PENDING
            and not records.reason_reported(record, reason)
        ):
            kept[key] = record.pending_reported_at + cadence.pending_refresh
    return kept
