"""Spans of the reserve-then-bind exchange, and one trace per workload generation: the first
generation's spans continue the submission's trace; a workload queued again gets a trace of its
own at its next dispatch — a root linked to the submission — which the offer carries to the
agent in its workload's annotation and which the hub's reports of that generation join; a late
report of an older generation stays in its own trace."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.tracecontext import TRACEPARENT_ANNOTATION, parse
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Workload
from hub.placement.cycle import OfferDecision
from hub.placement.snapshot import ClusterName
from hub.tracing import HubTracing
from telemetry.tracing import traceparent_of

KEY = "team/train"


def traced() -> tuple[HubTracing, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return HubTracing(provider.get_tracer("test")), exporter, provider


def submitted(provider: TracerProvider) -> Workload:
    with provider.get_tracer("test").start_as_current_span("hub.submit") as span:
        parent = traceparent_of(span)
    assert parent is not None
    return Workload.model_validate(
        {
            "metadata": {
                "name": "train",
                "namespace": "team",
                "annotations": {TRACEPARENT_ANNOTATION: parent},
            },
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                    }
                ],
            },
        }
    )


def offer(wl: Workload, generation: int) -> OfferDecision:
    return OfferDecision(KEY, wl, (ClusterName("east"),), generation, True, "BestFit", {})


def trace_of(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def report(generation: int, phase: WorkloadPhase) -> WorkloadStatusReport:
    return WorkloadStatusReport(workload=KEY, generation=generation, phase=phase)


def test_the_first_generation_continues_the_submissions_trace() -> None:
    tracing, exporter, provider = traced()
    wl = submitted(provider)
    with tracing.dispatching(offer(wl, 1)) as offered:
        assert offered.offered(wl) is wl  # the offer carries the submission's trace
    (submit,) = spans(exporter, "hub.submit")
    (dispatch,) = spans(exporter, "hub.dispatch")
    assert trace_of(dispatch) == trace_of(submit)


def test_a_later_generation_is_a_trace_of_its_own_that_the_offer_and_reports_carry() -> None:
    tracing, exporter, provider = traced()
    wl = submitted(provider)
    (submit,) = spans(exporter, "hub.submit")
    with tracing.dispatching(offer(wl, 2)) as offered:
        carried = offered.offered(wl)
    (dispatch,) = spans(exporter, "hub.dispatch")
    assert trace_of(dispatch) != trace_of(submit) and dispatch.parent is None
    assert [link.context.span_id for link in dispatch.links] == [submit.context.span_id]
    # The agent's spans of generation 2 hang from the annotation the offer carries; the
    # hub's own copy of the workload keeps the submission's.
    annotation = parse(carried.metadata.annotations[TRACEPARENT_ANNOTATION])
    assert annotation is not None and annotation.trace_id == trace_of(dispatch)
    assert (
        wl.metadata.annotations[TRACEPARENT_ANNOTATION]
        != (carried.metadata.annotations[TRACEPARENT_ANNOTATION])
    )
    with tracing.report("east", report(2, WorkloadPhase.RUNNING), wl, None):
        pass
    with tracing.report("east", report(1, WorkloadPhase.EVICTED), wl, None):
        pass  # a late report of the first generation
    current, late = spans(exporter, "hub.report")
    assert trace_of(current) == trace_of(dispatch)
    assert trace_of(late) == trace_of(submit)
    with tracing.report("east", report(2, WorkloadPhase.SUCCEEDED), wl, None):
        pass
    assert tracing._generations == {}  # forgotten once the generation ended


def test_a_reservation_report_and_the_bind_it_makes_are_spans_of_the_generations_trace() -> None:
    tracing, exporter, provider = traced()
    wl = submitted(provider)
    with tracing.dispatching(offer(wl, 1)) as offered:
        to_east = offered.offer("east")
    assert to_east is not None
    with tracing.report("east", report(1, WorkloadPhase.RESERVED), wl, to_east) as answer:
        bind = answer.sending("bind", "east")
        answer.outcome(True, None)
    assert bind is not None
    (submit,) = spans(exporter, "hub.submit")
    (hub_offer,) = spans(exporter, "hub.offer")
    (reserved,) = spans(exporter, "hub.report")
    (bound,) = spans(exporter, "hub.bind")
    assert {trace_of(s) for s in (hub_offer, reserved, bound)} == {trace_of(submit)}
    assert reserved.parent is not None and reserved.parent.span_id == hub_offer.context.span_id
    assert bound.parent is not None and bound.parent.span_id == reserved.context.span_id
    assert reserved.attributes is not None and reserved.attributes["multiq.phase"] == "Reserved"
    # The bind message carries the bind span's context to the agent.
    carried = parse(bind.traceparent)
    assert carried is not None and carried.span_id == bound.context.span_id
