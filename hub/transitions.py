"""How a workload's status at the hub changes, as pure functions on the Workload model.

Every change the hub makes to a workload's status — offered (bound, or as a reservation
request), rejected by a cluster, pending on a cluster, reserved and bound, admitted, running,
finished, evicted and requeued — is one function here that takes the workload, the facts and
`now`, and returns the new workload (and, for an agent's report, what to tell the clusters:
`ReportOutcome`). No I/O: the dispatch shell and the session handlers read, call one of these,
and write back with CAS, so the rules are tested alone and redelivered reports are harmless
(same facts, same result). The rules are docs/exactly-once.md's: a cluster's report counts
only when it holds the workload's reservation request or its binding for the current
generation; a reservation binds only through the hub's choice; nothing else binds.

They change only `status`, and they replace what they change — a condition, a cluster's
pending reason, the pod counts — rather than editing it in place; only the status's own
lists are appended to or assigned into. So `for_change` (a new status object and new lists,
sharing the items) is copy enough to change a workload the hub's mirror still holds.

Called by: hub.dispatch (offers, timeouts, cluster loss), hub.sessions (agent reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from api.meta import Condition, ConditionStatus
from api.v1alpha1.federation import RequeuingStrategy
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import (
    ClusterPendingReason,
    RequeueState,
    Workload,
    WorkloadPods,
    WorkloadStatus,
)

__all__ = [
    "ADMITTED",
    "EVICTED",
    "FINISHED",
    "PODS_READY",
    "QUOTA_RESERVED",
    "REQUEUED",
    "ReportOutcome",
    "apply_rejection",
    "apply_report",
    "for_change",
    "is_admitted",
    "is_finished",
    "mark_bound_offer",
    "mark_cancel_requested",
    "mark_cancelled",
    "mark_offer_failed",
    "mark_offered",
    "mark_withdrawing",
    "reactivated",
    "requeue",
    "set_condition",
    "unbind",
]

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
PODS_READY = "PodsReady"
FINISHED = "Finished"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"


def for_change(wl: Workload) -> Workload:
    """A copy of `wl` that the functions here may change without touching `wl`."""
    st = wl.status
    if st is None:
        return wl.model_copy()
    status = st.model_copy(
        update={
            "conditions": list(st.conditions),
            "reclaimable_pods": list(st.reclaimable_pods),
            "nominated_cluster_names": list(st.nominated_cluster_names),
            "cluster_pending_reasons": list(st.cluster_pending_reasons),
        }
    )
    return wl.model_copy(update={"status": status})


def _status(wl: Workload) -> WorkloadStatus:
    if wl.status is None:
        wl.status = WorkloadStatus()
    return wl.status


def set_condition(
    wl: Workload, type_: str, status: bool, reason: str, message: str, now: datetime
) -> None:
    """Set a condition; lastTransitionTime moves only when the status flips."""
    st = _status(wl)
    value: ConditionStatus = "True" if status else "False"
    for i, cond in enumerate(st.conditions):
        if cond.type == type_:
            changed = cond.status != value
            st.conditions[i] = Condition(
                type=type_,
                status=value,
                reason=reason,
                message=message,
                last_transition_time=now if changed else cond.last_transition_time,
            )
            return
    st.conditions.append(
        Condition(
            type=type_, status=value, reason=reason, message=message, last_transition_time=now
        )
    )


def is_finished(wl: Workload) -> bool:
    return wl.is_condition_true(FINISHED)


def is_admitted(wl: Workload) -> bool:
    """Admitted on its cluster: its objects exist there (not merely bound or reserved)."""
    return wl.is_condition_true(ADMITTED)


def _set_cluster_reason(
    wl: Workload, cluster: str, reason: str, message: str, now: datetime
) -> None:
    st = _status(wl)
    for i, entry in enumerate(st.cluster_pending_reasons):
        if entry.cluster == cluster:
            same = entry.reason == reason and entry.message == message
            st.cluster_pending_reasons[i] = ClusterPendingReason(
                cluster=cluster,
                reason=reason,
                message=message,
                last_transition_time=entry.last_transition_time if same else now,
            )
            return
    st.cluster_pending_reasons.append(
        ClusterPendingReason(
            cluster=cluster, reason=reason, message=message, last_transition_time=now
        )
    )


def mark_offered(wl: Workload, clusters: list[str], generation: int, now: datetime) -> Workload:
    """Ask `clusters` to reserve under `generation` (nominated, not bound)."""
    st = _status(wl)
    st.dispatch_generation = generation
    st.nominated_cluster_names = sorted(set(st.nominated_cluster_names) | set(clusters))
    for cluster in clusters:
        _set_cluster_reason(wl, cluster, "Offered", "asked to reserve quota", now)
    set_condition(
        wl,
        QUOTA_RESERVED,
        False,
        "Dispatched",
        f"asked {', '.join(sorted(st.nominated_cluster_names))} to reserve quota",
        now,
    )
    return wl


def mark_bound_offer(wl: Workload, cluster: str, generation: int, now: datetime) -> Workload:
    """Bind `generation` to `cluster` and offer it there: only that cluster may run it."""
    st = _status(wl)
    st.dispatch_generation = generation
    st.cluster_name = cluster
    st.nominated_cluster_names = []
    _set_cluster_reason(wl, cluster, "Offered", "waiting for the agent to admit it", now)
    set_condition(wl, QUOTA_RESERVED, False, "Dispatched", f"bound to {cluster}", now)
    return wl


def mark_offer_failed(
    wl: Workload, cluster: str, reason: str, message: str, now: datetime
) -> Workload:
    """A nominee rejected the reservation request, released it or did not answer: it is no
    longer nominated."""
    st = _status(wl)
    st.nominated_cluster_names = [c for c in st.nominated_cluster_names if c != cluster]
    _set_cluster_reason(wl, cluster, reason, message, now)
    return wl


def mark_withdrawing(
    wl: Workload, cluster: str, reason: str, message: str, now: datetime
) -> Workload:
    """The hub asked the bound cluster to give an offer back (it did not answer in time);
    the binding stays until the cluster answers Withdrawn, or is lost."""
    _set_cluster_reason(wl, cluster, reason, message, now)
    return wl


def unbind(wl: Workload, cluster: str, reason: str, message: str, now: datetime) -> Workload:
    """The bound cluster gave back a generation it never admitted (rejected, released): the
    workload waits at the hub again. Not an eviction: nothing of it ran."""
    st = _status(wl)
    st.cluster_name = None
    st.admission = None
    st.pods = None
    _set_cluster_reason(wl, cluster, reason, message, now)
    set_condition(wl, QUOTA_RESERVED, False, reason.replace(":", ""), message, now)
    return wl


def mark_cancel_requested(wl: Workload, now: datetime) -> Workload:
    set_condition(wl, FINISHED, True, "Cancelled", "deleted by the user", now)
    return wl


def mark_cancelled(wl: Workload, reason: str, message: str, now: datetime) -> Workload:
    """Cancelled at the hub and kept (Slurm's scancel, or a dependency that can never be
    satisfied): finished, so nothing dispatches it again; the record stays for sacct. The
    clusters that hold it are told to Cancel by the caller."""
    set_condition(wl, FINISHED, True, reason, message, now)
    if not is_admitted(wl):
        set_condition(wl, QUOTA_RESERVED, False, reason, message, now)
    return wl


def requeue(wl: Workload, reason: str, message: str, now: datetime) -> Workload:
    """Unbind from its cluster and queue again at the hub (evicted, cluster lost, …)."""
    st = _status(wl)
    st.cluster_name = None
    st.admission = None
    st.nominated_cluster_names = []
    st.pods = None
    set_condition(wl, EVICTED, True, reason, message, now)
    set_condition(wl, QUOTA_RESERVED, False, reason, message, now)
    set_condition(wl, ADMITTED, False, reason, message, now)
    set_condition(wl, REQUEUED, True, reason, "requeued at the hub", now)
    # `requeueState` is the pods-ready backoff's bookkeeping alone (Kueue): a lost cluster
    # or a preemption does not bring a workload nearer its requeuing limit.
    return wl


PODS_READY_TIMEOUT = "PodsReadyTimeout"


def backoff_seconds(strategy: RequeuingStrategy, count: int) -> float:
    """base·2^(count−1), at most the maximum (Kueue's waitForPodsReady requeuing)."""
    exponent = min(max(count - 1, 0), 32)
    return float(min(strategy.backoff_base_seconds * 2**exponent, strategy.backoff_max_seconds))


def back_off(wl: Workload, strategy: RequeuingStrategy, message: str, now: datetime) -> Workload:
    """Requeued because its pods were not ready in time: it waits out its backoff before it
    is dispatched again, and past the backoff limit it is deactivated instead (`qctl resume
    workload` activates it again)."""
    st = _status(wl)
    count = (st.requeue_state.count or 0) + 1 if st.requeue_state else 1
    limit = strategy.backoff_limit_count
    if limit is not None and count > limit:
        st.requeue_state = RequeueState(count=count, requeue_at=None)
        # (a new spec: `for_change` copies only the status)
        wl.spec = wl.spec.model_copy(update={"active": False})
        set_condition(
            wl,
            REQUEUED,
            False,
            "RequeuingLimitExceeded",
            f"{message}; deactivated after {limit} requeues",
            now,
        )
        return wl
    at = now + timedelta(seconds=backoff_seconds(strategy, count))
    st.requeue_state = RequeueState(count=count, requeue_at=at)
    set_condition(
        wl,
        REQUEUED,
        True,
        "BackoffRequeue",
        f"{message}; dispatched again from {at.isoformat()}",
        now,
    )
    return wl


def reactivated(wl: Workload, now: datetime) -> Workload:
    """Made active again after a stop (`qctl resume workload`): as Kueue, the requeuing
    count starts again from zero, so one more pods-ready timeout backs off from the start
    instead of deactivating it at once. Nothing changes for a workload that is not active
    or never requeued (the change is safe to apply twice)."""
    st = wl.status
    if not wl.spec.active or st is None or st.requeue_state is None:
        return wl
    st.requeue_state = None
    set_condition(wl, REQUEUED, True, "Reactivated", "the workload was activated again", now)
    return wl


def held_back_until(wl: Workload) -> datetime | None:
    """When a workload in its requeuing backoff may be dispatched again (None: now)."""
    st = wl.status
    if st is None or st.requeue_state is None or st.requeue_state.requeue_at is None:
        return None
    requeued = next((c for c in st.conditions if c.type == REQUEUED), None)
    if requeued is None or requeued.reason != "BackoffRequeue":
        return None
    return st.requeue_state.requeue_at


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    """What an agent's report did, and what the clusters must be told."""

    accepted: bool
    bind: str | None = None
    """Send `Bind` to this cluster (it holds the reservation the hub bound)."""
    withdraw: tuple[tuple[str, str, str], ...] = ()
    """(cluster, reason, message): send `Withdraw` of the report's generation."""
    refusal: str = ""
    """Why the report was not accepted (logged)."""


_LIVE = frozenset(
    {WorkloadPhase.PENDING, WorkloadPhase.RESERVED, WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING}
)


def _refuse(cluster: str, report: WorkloadStatusReport, why: str, reason: str) -> ReportOutcome:
    # A sender still holding it must stop; one that already let go needs telling nothing.
    withdraw = ((cluster, reason, why),) if report.phase in _LIVE else ()
    return ReportOutcome(False, withdraw=withdraw, refusal=why)


def apply_report(
    wl: Workload,
    cluster: str,
    report: WorkloadStatusReport,
    now: datetime,
    *,
    requeuing: RequeuingStrategy | None = None,
) -> tuple[Workload, ReportOutcome]:
    """Apply an agent's status report, if the sender may make it (see the module
    docstring); the outcome says what to send. `requeuing`: the cluster's waitForPodsReady
    requeuing strategy, for an eviction because pods were not ready (default: Kueue's)."""
    st = _status(wl)
    if is_finished(wl):
        return wl, ReportOutcome(False, refusal="the workload is finished")
    if st.dispatch_generation != report.generation:
        why = f"generation {report.generation} is not the current {st.dispatch_generation}"
        return wl, _refuse(cluster, report, why, "StaleGeneration")
    if st.cluster_name is not None and st.cluster_name != cluster:
        return wl, _refuse(cluster, report, f"bound to cluster {st.cluster_name}", "BoundElsewhere")
    if st.cluster_name is None and cluster not in st.nominated_cluster_names:
        why = f"generation {report.generation} was not offered to cluster {cluster}"
        return wl, _refuse(cluster, report, why, "NotDispatchedHere")
    if st.cluster_name is None:
        return _from_nominee(wl, cluster, report, now)
    return _from_bound(wl, cluster, report, now, requeuing or RequeuingStrategy())


def _from_nominee(
    wl: Workload, cluster: str, report: WorkloadStatusReport, now: datetime
) -> tuple[Workload, ReportOutcome]:
    st = _status(wl)
    phase = report.phase
    if phase is WorkloadPhase.PENDING:
        _set_cluster_reason(
            wl, cluster, report.pending_reason or "Pending", report.pending_message, now
        )
        return wl, ReportOutcome(True)
    if phase is WorkloadPhase.RESERVED:
        others = [c for c in st.nominated_cluster_names if c != cluster]
        st.cluster_name = cluster
        st.nominated_cluster_names = []
        st.cluster_pending_reasons = []
        if report.admission is not None:
            st.admission = report.admission
        cq = report.admission.cluster_queue if report.admission else "its cluster queue"
        set_condition(
            wl,
            QUOTA_RESERVED,
            True,
            "QuotaReserved",
            f"quota reserved in ClusterQueue {cq} on cluster {cluster}, which it is bound to",
            now,
        )
        withdraw = tuple((c, "BoundElsewhere", f"bound to cluster {cluster}") for c in others)
        return wl, ReportOutcome(True, bind=cluster, withdraw=withdraw)
    if phase in (WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN):
        reason = report.pending_reason or phase.value
        mark_offer_failed(wl, cluster, reason, report.pending_message, now)
        return wl, ReportOutcome(True)
    # Admitted, Running or finished without a binding: a reservation must never run.
    why = f"cluster {cluster} reported {phase.value} for a reservation that was not bound"
    return wl, ReportOutcome(False, withdraw=((cluster, "NotBound", why),), refusal=why)


def _from_bound(
    wl: Workload,
    cluster: str,
    report: WorkloadStatusReport,
    now: datetime,
    requeuing: RequeuingStrategy,
) -> tuple[Workload, ReportOutcome]:
    st = _status(wl)
    phase = report.phase
    if phase is WorkloadPhase.PENDING:
        _set_cluster_reason(
            wl, cluster, report.pending_reason or "Pending", report.pending_message, now
        )
        return wl, ReportOutcome(True)
    if phase is WorkloadPhase.RESERVED:
        # Bound already: the Bind was lost with a session, or is on its way. Send it again.
        if report.admission is not None and st.admission is None:
            st.admission = report.admission
        return wl, ReportOutcome(True, bind=cluster)
    if phase in (WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN):
        reason = report.pending_reason or phase.value
        if is_admitted(wl):
            kind = "EvictedOnCluster" if phase is WorkloadPhase.EVICTED else "Withdrawn"
            message = report.pending_message or f"evicted on cluster {cluster}"
            preempted = _preempted_condition(report)
            if preempted is not None:
                # Kueue's pair: Evicted for Preempted, and Preempted saying which rule chose it.
                kind = "Preempted"
                message = f"{message} (on cluster {cluster})"
                set_condition(wl, PREEMPTED, True, preempted.reason, message, now)
            requeue(wl, kind, message, now)
            if reason == PODS_READY_TIMEOUT:
                back_off(wl, requeuing, message, now)
        else:
            unbind(wl, cluster, reason, report.pending_message or f"given back by {cluster}", now)
        return wl, ReportOutcome(True)
    # Admitted, Running, Succeeded or Failed on the cluster it is bound to.
    if not is_admitted(wl):
        st.cluster_pending_reasons = []
        cq = report.admission.cluster_queue if report.admission else "its cluster queue"
        set_condition(
            wl,
            QUOTA_RESERVED,
            True,
            "QuotaReserved",
            f"quota reserved in ClusterQueue {cq} on cluster {cluster}",
            now,
        )
        set_condition(
            wl,
            ADMITTED,
            True,
            "Admitted",
            f"admitted on cluster {cluster} by ClusterQueue {cq}",
            now,
        )
        set_condition(wl, EVICTED, False, "Admitted", "", now)
        _settle_preempted(wl, now)
    if report.admission is not None:
        st.admission = report.admission
    st.pods = WorkloadPods(
        pending=report.pods.pending,
        running=report.pods.running,
        ready=report.pods.ready,
        succeeded=report.pods.succeeded,
        failed=report.pods.failed,
        # A report after the pods are gone names no node: the nodes they ran on stay known.
        nodes=list(report.pods.nodes) or (list(st.pods.nodes) if st.pods is not None else []),
    )
    if phase is WorkloadPhase.RUNNING:
        # As Kueue counts them: pods that already succeeded stay "ready".
        ready = report.pods.ready + report.pods.succeeded
        set_condition(
            wl,
            PODS_READY,
            ready > 0,
            "PodsReady" if ready > 0 else "WaitingForPods",
            f"{ready} pod(s) ready, {report.pods.running} running",
            now,
        )
    elif phase is WorkloadPhase.ADMITTED and report.pending_reason:
        # Admitted, but its pods cannot start there yet, and the agent says why (for example
        # JobsForbidden: the agent's ClusterRole lacks a rule).
        set_condition(wl, PODS_READY, False, report.pending_reason, report.pending_message, now)
    elif phase is WorkloadPhase.SUCCEEDED:
        set_condition(
            wl,
            FINISHED,
            True,
            "Succeeded",
            report.pending_message or "the job finished successfully",
            now,
        )
    elif phase is WorkloadPhase.FAILED:
        detail = "; ".join(
            f"{e.pod}/{e.container} exited {e.exit_code}" + (f" ({e.reason})" if e.reason else "")
            for e in report.exits
        )
        set_condition(
            wl, FINISHED, True, "Failed", report.pending_message or detail or "the job failed", now
        )
    return wl, ReportOutcome(True)


def _preempted_condition(report: WorkloadStatusReport) -> Condition | None:
    """The agent's Preempted condition, when a preemption is why it evicted the workload."""
    return next((c for c in report.conditions if c.type == PREEMPTED and c.status == "True"), None)


def _settle_preempted(wl: Workload, now: datetime) -> None:
    """Admitted again: a standing Preempted condition turns False and keeps what it said as
    "Previously: …" (Kueue, when quota is reserved again)."""
    st = _status(wl)
    current = next((c for c in st.conditions if c.type == PREEMPTED), None)
    if current is not None and current.status == "True":
        set_condition(wl, PREEMPTED, False, "QuotaReserved", f"Previously: {current.message}", now)


def apply_rejection(
    wl: Workload, cluster: str, generation: int, reason: str, message: str, now: datetime
) -> Workload:
    """A cluster refused an offer (it can never admit it there, or will not run that
    generation again): a nominee drops out, a bound offer goes back to the hub (as an eviction
    once it had been admitted). Anything else is stale."""
    st = _status(wl)
    if st.dispatch_generation != generation or is_finished(wl):
        return wl
    if st.cluster_name == cluster:
        if is_admitted(wl):
            # A re-sent offer the cluster will not run again (it gave it back): whatever ran
            # there stopped, so it is queued again.
            return requeue(wl, "EvictedOnCluster", message or reason, now)
        return unbind(wl, cluster, reason, message, now)
    if st.cluster_name is None and cluster in st.nominated_cluster_names:
        return mark_offer_failed(wl, cluster, reason, message, now)
    return wl
