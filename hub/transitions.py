"""How a workload's status at the hub changes, as pure functions on the Workload model.

Every change the hub makes to a workload's status — offered, rejected by a cluster, pending
on a cluster, admitted and bound, running, finished, evicted and requeued — is one function
here that takes the workload, the facts and `now`, and returns the new workload. No I/O: the
dispatch loop and session handlers read, call one of these, and write back with CAS, so the
rules are tested alone and redelivered reports are harmless (same facts, same result).

They change only `status`, and they replace what they change — a condition, a cluster's
pending reason, the pod counts — rather than editing it in place; only the status's own
lists are appended to or assigned into. So `for_change` (a new status object and new lists,
sharing the items) is copy enough to change a workload the hub's mirror still holds.

Called by: hub.dispatch (offers, timeouts, cluster loss), hub.sessions (agent reports).
"""

from __future__ import annotations

from datetime import datetime

from api.meta import Condition, ConditionStatus
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
    "apply_report",
    "for_change",
    "is_finished",
    "mark_cancel_requested",
    "mark_offer_failed",
    "mark_offered",
    "requeue",
    "set_condition",
]

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
PODS_READY = "PodsReady"
FINISHED = "Finished"
EVICTED = "Evicted"
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
    """Offer to `clusters` under a new dispatch generation (nominated, not yet bound)."""
    st = _status(wl)
    st.dispatch_generation = generation
    st.nominated_cluster_names = sorted(set(st.nominated_cluster_names) | set(clusters))
    for cluster in clusters:
        _set_cluster_reason(wl, cluster, "Offered", "waiting for the agent's answer", now)
    set_condition(
        wl,
        QUOTA_RESERVED,
        False,
        "Dispatched",
        f"offered to {', '.join(sorted(clusters))}",
        now,
    )
    return wl


def mark_offer_failed(
    wl: Workload, cluster: str, reason: str, message: str, now: datetime
) -> Workload:
    """A cluster rejected the offer or did not answer: it is no longer nominated."""
    st = _status(wl)
    st.nominated_cluster_names = [c for c in st.nominated_cluster_names if c != cluster]
    _set_cluster_reason(wl, cluster, reason, message, now)
    return wl


def mark_cancel_requested(wl: Workload, now: datetime) -> Workload:
    set_condition(wl, FINISHED, True, "Cancelled", "deleted by the user", now)
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
    count = (st.requeue_state.count or 0) if st.requeue_state else 0
    st.requeue_state = RequeueState(count=count + 1, requeue_at=now)
    return wl


def apply_report(
    wl: Workload, cluster: str, report: WorkloadStatusReport, now: datetime
) -> tuple[Workload, list[str]]:
    """Apply an agent's status report. Returns the workload and the clusters to withdraw from
    (the other nominees once one cluster admitted it). Reports for another generation than
    the workload's current one change nothing."""
    st = _status(wl)
    if st.dispatch_generation != report.generation or is_finished(wl):
        return wl, []
    if st.cluster_name not in (None, cluster):
        # Bound elsewhere already: this cluster lost the race; it must stop.
        return wl, [cluster]
    phase = report.phase
    if phase is WorkloadPhase.PENDING:
        _set_cluster_reason(
            wl, cluster, report.pending_reason or "Pending", report.pending_message, now
        )
        return wl, []
    if phase in (WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN):
        if st.cluster_name == cluster:
            reason = "EvictedOnCluster" if phase is WorkloadPhase.EVICTED else "Withdrawn"
            message = report.pending_message or f"evicted on cluster {cluster}"
            requeue(wl, reason, message, now)
        else:
            mark_offer_failed(wl, cluster, phase.value, report.pending_message, now)
        return wl, []
    # Admitted, Running, Succeeded or Failed: the workload is bound to this cluster.
    withdraw: list[str] = []
    if st.cluster_name is None:
        st.cluster_name = cluster
        withdraw = [c for c in st.nominated_cluster_names if c != cluster]
        st.nominated_cluster_names = []
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
    if report.admission is not None:
        st.admission = report.admission
    st.pods = WorkloadPods(
        pending=report.pods.pending,
        running=report.pods.running,
        ready=report.pods.ready,
        succeeded=report.pods.succeeded,
        failed=report.pods.failed,
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
    return wl, withdraw
