"""The agent's spans of a workload's trace: the hub's messages it handled, the admission cycle
that admitted the workload, its materialisation (the Job creates), its first pod running,
its end.

A workload's trace began at its submission; the hub keeps that context in the workload
(annotation `multiq.dev/traceparent`, api.tracecontext), which the offer carries and the
agent's record keeps (also across restarts). A message's span is a child of the hub span
that sent it (the envelope's `traceContext`: hub.offer, hub.bind, hub.withdraw); every other
span is a child of the workload's context. No span stays open while a workload waits or runs.

    agent.offer / agent.bind / agent.withdraw / agent.cancel   CONSUMER: a hub message handled
    agent.admission     the cycle that admitted it (a reservation, or bound: admitted)
    agent.materialize   its Jobs created
    agent.pod_running   first seen Running (a moment)
    agent.finish        Succeeded or Failed (a moment)
    agent.given_back    Evicted or Withdrawn (a moment; the reason as an attribute)

The shell calls these with what its pure parts decided (the engine's `Admit`, a record
before and after a transition); nothing here decides anything. With tracing off (no exporter,
telemetry.tracing) every method returns at once.

Called by: agent.admission, agent.job_making (`materializing`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from opentelemetry import context as otel_context
from opentelemetry.trace import Span, SpanKind, Tracer

from agent.engine.result import Admit
from agent.records import Record
from api.tracecontext import TRACEPARENT_ANNOTATION
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    DispatchOffer,
    TraceContext,
    Withdraw,
    WorkloadPhase,
)
from api.v1alpha1.workload import Workload
from telemetry.tracing import context_of, tracer

__all__ = ["AgentTracing"]

_MESSAGE_SPANS = {
    "DispatchOffer": "agent.offer",
    "Bind": "agent.bind",
    "Withdraw": "agent.withdraw",
    "Cancel": "agent.cancel",
}
_MOMENTS = {
    WorkloadPhase.RUNNING: "agent.pod_running",
    WorkloadPhase.SUCCEEDED: "agent.finish",
    WorkloadPhase.FAILED: "agent.finish",
    WorkloadPhase.EVICTED: "agent.given_back",
    WorkloadPhase.WITHDRAWN: "agent.given_back",
}


def _workload_context(wl: Workload | None) -> otel_context.Context | None:
    if wl is None:
        return None
    return context_of(wl.metadata.annotations.get(TRACEPARENT_ANNOTATION))


class AgentTracing:
    def __init__(self, tracer_: Tracer | None = None, *, cluster: str = "") -> None:
        self.tracer = tracer_ if tracer_ is not None else tracer("multiq.agent")
        self.cluster = cluster

    @contextlib.contextmanager
    def message(
        self,
        key: str,
        message: DispatchOffer | Bind | Withdraw | Cancel,
        held: Record | None,
        trace_context: TraceContext | None,
    ) -> Iterator[Span | None]:
        """Around handling a hub message about a workload."""
        if self.tracer is None:
            yield None
            return
        parent = context_of(trace_context.traceparent if trace_context else None)
        if parent is None:
            offered = message.workload if isinstance(message, DispatchOffer) else None
            parent = _workload_context(offered or (held.workload if held else None))
        attributes: dict[str, str | int | bool] = {
            "multiq.workload": key,
            "multiq.cluster": self.cluster,
            "multiq.generation": message.generation,
        }
        if isinstance(message, DispatchOffer):
            attributes["multiq.dispatch.bound"] = message.bound
        elif isinstance(message, Withdraw | Cancel):
            attributes["multiq.reason"] = message.reason
        name = _MESSAGE_SPANS[message.type]
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        ) as span:
            yield span

    def changed(self, before: Record | None, after: Record | None) -> None:
        """A record changed: its first Running, its end, or its giving back are moments of
        the trace."""
        if self.tracer is None or after is None:
            return
        if before is not None and before.phase is after.phase:
            return
        name = _MOMENTS.get(after.phase)
        if name is None:
            return
        attributes: dict[str, str | int] = {
            "multiq.workload": after.key,
            "multiq.cluster": self.cluster,
            "multiq.generation": after.generation,
            "multiq.phase": after.phase.value,
        }
        report = after.last_report
        if report is not None and report.pending_reason:
            attributes["multiq.reason"] = report.pending_reason
        if report is not None and after.phase is WorkloadPhase.RUNNING:
            attributes["multiq.pods.running"] = report.pods.running
        parent = _workload_context(after.workload)
        self.tracer.start_span(name, context=parent, attributes=attributes).end()

    def admitted(self, record: Record, admit: Admit, cycle: int, started: float) -> None:
        """The admission cycle that started at `started` (seconds) admitted `record`."""
        if self.tracer is None:
            return
        admission = admit.admission
        flavors = sorted(
            {
                f"{ps.name}:{res}={flavor}"
                for ps in admission.pod_sets
                for res, flavor in ps.flavors.items()
            }
        )
        attributes: dict[str, str | int | bool | list[str]] = {
            "multiq.workload": record.key,
            "multiq.cluster": self.cluster,
            "multiq.generation": record.generation,
            "multiq.admission.cycle": cycle,
            "multiq.admission.cluster_queue": admission.cluster_queue,
            "multiq.admission.flavors": flavors,
            "multiq.admission.borrowing": admit.borrowing,
            "multiq.admission.reservation": not record.bound,
        }
        span = self.tracer.start_span(
            "agent.admission",
            context=_workload_context(record.workload),
            attributes=attributes,
            start_time=int(started * 1e9),
        )
        span.end(max(int(started * 1e9), time.time_ns()))

    @contextlib.contextmanager
    def materializing(self, record: Record) -> Iterator[Span | None]:
        """Around creating the workload's Jobs."""
        if self.tracer is None:
            yield None
            return
        attributes: dict[str, str | int] = {
            "multiq.workload": record.key,
            "multiq.cluster": self.cluster,
            "multiq.generation": record.generation,
        }
        with self.tracer.start_as_current_span(
            "agent.materialize", context=_workload_context(record.workload), attributes=attributes
        ) as span:
            yield span
