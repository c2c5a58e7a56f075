"""The agents' answers: what each report, rejection, capacity report, disconnection and Hello
of a member cluster does at the hub. The decisions are pure (hub.transitions for a report,
hub.placement.reconcile for a Hello); this shell writes them with compare-and-swap, keeps the
offer book in step and tells the clusters what follows — Bind the reservation the hub chose,
Withdraw what another cluster holds or what the hub no longer wants there, Cancel what the user
deleted (docs/exactly-once.md).

Called by: hub.sessions (every message of an agent's control lane), hub.app (deletions).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    CapacityReport,
    HeldWorkload,
    Hello,
    OfferRejected,
    TraceContext,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.dispatch import Dispatcher
from hub.fleet import admission_room
from hub.metrics import OfferOutcome
from hub.placement.reconcile import DEACTIVATED, deactivation_withdrawals, reconcile
from hub.tracing import ReportSpan

__all__ = ["AgentAnswers"]

log = logging.getLogger(__name__)


class AgentAnswers:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.state = dispatcher.state
        self.book = dispatcher.book
        self.writer = dispatcher.writer
        self.tracing = dispatcher.tracing
        self.metrics = dispatcher.metrics

    def _now(self) -> datetime:
        return self.dispatcher.clock()

    async def on_status(
        self,
        cluster: str,
        report: WorkloadStatusReport,
        trace_context: TraceContext | None = None,
    ) -> None:
        entry = self.state.workloads.get(report.workload)
        wl = entry.workload if entry is not None else None
        with self.tracing.report(cluster, report, wl, trace_context) as traced:
            await self._on_status(cluster, report, traced)

    def on_status_received(self, cluster: str, report: WorkloadStatusReport) -> None:
        """Count an answer from its arrival, before its task applies it: the agent's next
        capacity report, sent after this answer on the same lane, already shows the room
        the offer took, and may be handled before that task runs (reports of one workload
        are applied in order, different workloads' side by side)."""
        if report.phase is not WorkloadPhase.PENDING:
            self._mark_answered(cluster, report)

    def _mark_answered(self, cluster: str, answer: WorkloadStatusReport | HeldWorkload) -> None:
        """Only an answer to the current round's offer (a report, or a capacity report's
        listing of it as admitted): a late answer of an earlier generation does not show the
        room this round's offer books."""
        entry = self.state.workloads.get(answer.workload)
        st = entry.workload.status if entry is not None else None
        if st is not None and st.dispatch_generation == answer.generation:
            self.book.mark_answered(answer.workload, cluster)

    async def _on_status(
        self, cluster: str, report: WorkloadStatusReport, traced: ReportSpan
    ) -> None:
        key = report.workload
        now = self._now()
        outcome = transitions.ReportOutcome(False)
        entry = self.state.workloads.get(key)
        before = entry.workload if entry is not None else None

        member = self.state.find(MemberCluster, cluster)
        ready = member.spec.wait_for_pods_ready if isinstance(member, MemberCluster) else None
        requeuing = ready.requeuing_strategy if ready is not None else None

        def change(wl: Workload) -> Workload:
            nonlocal outcome
            wl, outcome = transitions.apply_report(wl, cluster, report, now, requeuing=requeuing)
            return wl

        if report.phase is WorkloadPhase.PENDING and cluster in self.book.get(key).offers:
            self.book.mark_queued(key, cluster)
        else:
            self._mark_answered(cluster, report)
        written = await self.writer.change(key, change) if key in self.state.workloads else None
        if report.phase is not WorkloadPhase.PENDING and _of_round(before, report.generation):
            # Closed once the answer is written, not before: until then the mirror still
            # shows the workload as it was, and a cycle in between would offer it again.
            # Only an answer of the round offered closes it: a late report of an earlier
            # generation (refused) answers nothing, and closing the open offer on it let the
            # next cycle offer the workload again while that cluster was reserving it.
            self.book.close_offer(key, cluster)
        if written is None and key not in self.state.workloads:
            # The user deleted it meanwhile: the cluster must let it go.
            self.dispatcher.send(
                cluster,
                Cancel(workload=key, generation=report.generation, reason="WorkloadDeleted"),
            )
            return
        traced.outcome(outcome.accepted, outcome.refusal)
        if outcome.accepted:
            self._room_freed(cluster, report, before)
        self.metrics.report(cluster, report.phase.value, accepted=outcome.accepted)
        if not outcome.accepted:
            log.info("cluster %s: report of %s refused: %s", cluster, key, outcome.refusal)
        self._tell(key, report.generation, outcome, traced)
        self.dispatcher.wake()

    def _room_freed(
        self, cluster: str, report: WorkloadStatusReport, before: Workload | None
    ) -> None:
        """A workload that ran here finished: its room is free on the cluster now, and is
        offered again without waiting for the agent's next capacity report (a report paces
        the refilling of a cluster of short jobs otherwise)."""
        if report.phase not in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
            return
        if before is None or before.status is None or report.observed_at is None:
            return
        if before.status.cluster_name != cluster or before.is_condition_true("Finished"):
            return  # not bound here, or a redelivered report of a finish already counted
        admission = report.admission or before.status.admission
        state = self.dispatcher.fleet.clusters.get(cluster)
        if admission is None or state is None:
            return
        if state.free_room(report.observed_at, admission_room(admission)):
            self.book.room_grew()

    def _tell(
        self,
        key: str,
        generation: int,
        outcome: transitions.ReportOutcome,
        traced: ReportSpan,
    ) -> None:
        send = self.dispatcher.send
        if outcome.bind is not None:
            context = traced.sending("bind", outcome.bind)
            send(outcome.bind, Bind(workload=key, generation=generation), trace_context=context)
        for other, reason, message in outcome.withdraw:
            self.metrics.offer_outcome(other, OfferOutcome.WITHDRAWN)
            self.book.close_offer(key, other)
            self.book.give_back_room(key, other)
            withdraw = Withdraw(workload=key, generation=generation, reason=reason, message=message)
            send(other, withdraw, trace_context=traced.sending("withdraw", other))

    async def on_rejected(self, cluster: str, message: OfferRejected) -> None:
        key = message.workload
        self.metrics.offer_outcome(cluster, OfferOutcome.REJECTED)
        self.book.give_back_room(key, cluster)
        change = partial(
            transitions.apply_rejection,
            cluster=cluster,
            generation=message.generation,
            reason=f"Rejected:{message.reason.value}",
            message=message.message,
            now=self._now(),
        )
        try:
            if key in self.state.workloads:
                await self.writer.change(key, change)
        finally:
            self.book.close_offer(key, cluster)  # after the write, as in on_status
        self.dispatcher.wake()

    def on_capacity(self, cluster: str, report: CapacityReport) -> None:
        self.book.room_grew()
        for admitted in report.admitted:
            # Admitted there, its report still waiting for the pods: this report counts it.
            self._mark_answered(cluster, admitted)
        for key in self.book.keys_booking(cluster, answered_only=True):
            self.book.give_back_room(key, cluster)  # the report shows what they took
        self.dispatcher.wake()

    def on_disconnect(self, cluster: str) -> None:
        self.book.room_grew()  # (not room, but what the waiting are told changes)
        for key in self.book.keys_booking(cluster):
            self.book.give_back_room(key, cluster)
        self.dispatcher.wake()

    def on_workload_deleted(self, key: str, last: Workload) -> None:
        """A user deleted a workload: every cluster holding or offered it must drop it."""
        self.book.drop(key)
        self.state.take_fresh_source(key)
        st = last.status
        if st is None:
            return
        for cluster in sorted({c for c in [st.cluster_name, *st.nominated_cluster_names] if c}):
            cancel = Cancel(
                workload=key,
                generation=st.dispatch_generation or 1,
                reason="WorkloadDeleted",
                message="deleted by the user",
            )
            self.dispatcher.send(cluster, cancel)

    async def on_reactivated(self, key: str) -> None:
        """A user resumed a stopped workload: its requeuing count starts again (Kueue)."""
        if key in self.state.workloads:
            await self.writer.change(key, partial(transitions.reactivated, now=self._now()))
        self.dispatcher.wake()

    def on_workload_changed(self, key: str, old: Workload | None, new: Workload) -> None:
        """A user stopped a workload (`spec.active: false`): every cluster holding it or
        offered it must give it back (its Withdrawn report unbinds it; resumed, it is
        dispatched again as a new generation)."""
        for cluster, generation in deactivation_withdrawals(old, new):
            self.dispatcher.send(cluster, _deactivation(key, generation))

    async def reconcile_hello(self, cluster: str, hello: Hello) -> None:
        """After (re)connect: stop what the hub no longer wants there, re-send what it does."""
        self.book.room_grew()
        ours = sorted(self.state.by_cluster.get(cluster, ()))
        keys = {h.workload for h in hello.workloads} | set(ours)
        workloads = {k: e.workload for k in keys if (e := self.state.workloads.get(k))}
        plan = reconcile(cluster, hello.workloads, workloads, ours)
        send = self.dispatcher.send
        for item in plan.cancel:
            send(
                cluster,
                Cancel(
                    workload=item.workload, generation=item.generation, reason="WorkloadDeleted"
                ),
            )
        for item in plan.withdraw:
            withdraw = Withdraw(
                workload=item.workload,
                generation=item.generation,
                reason="NotDispatchedHere",
                message="the hub dispatched it elsewhere",
            )
            send(cluster, withdraw)
        for item in plan.deactivated:
            send(cluster, _deactivation(item.workload, item.generation))
        for item in plan.bind:
            send(cluster, Bind(workload=item.workload, generation=item.generation))
        for item in plan.catch_up:
            await self.on_status(cluster, _as_report(item))
        now = self._now()
        for key, bound in plan.resend:
            wl = workloads[key]
            generation = (wl.status.dispatch_generation if wl.status else None) or 1
            record = self.book.get(key)
            self.book.update(key, offers={**record.offers, cluster: now}, bound=bound)
            offer = self.dispatcher.offer_message(
                wl, generation, bound, await self.dispatcher.source(wl)
            )
            send(cluster, offer)
        self.dispatcher.wake()


def _of_round(wl: Workload | None, generation: int) -> bool:
    """Whether a report of `generation` answers the round of offers `wl` is in: one of an
    earlier generation does not (with no round known, any report does)."""
    current = wl.status.dispatch_generation if wl is not None and wl.status is not None else None
    return current is None or generation >= current


def _as_report(held: HeldWorkload) -> WorkloadStatusReport:
    return WorkloadStatusReport(
        workload=held.workload, generation=held.generation, phase=held.phase
    )


def _deactivation(key: str, generation: int) -> Withdraw:
    return Withdraw(
        workload=key,
        generation=generation,
        reason=DEACTIVATED,
        message="the workload was stopped (spec.active=false)",
    )
