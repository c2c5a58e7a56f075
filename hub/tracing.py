"""The hub's spans of a workload's trace: its submission, each dispatch decision, the offers,
binds and withdrawals it sends, and the agents' reports it applies.

One trace per workload generation, from `qctl submit` to its end. The submission span
continues the caller's `traceparent` header and its own context is written into the workload
(annotation `multiq.dev/traceparent`, api.tracecontext), durably, before the hub answers;
every later span of the first generation — minutes or hours later, after a restart or on
another hub — is a child of that context, and ends at once (no span stays open while a
workload waits). A workload queued again (evicted, given back) starts a new trace at its next
dispatch: `hub.dispatch` of generation 2 and later is a root linked to the submission span,
and the offer carries that trace in its workload's annotation, so the agent's spans of that
generation join it; the hub's own later spans of it (reports, binds) join it too while this
hub remembers it (after a restart they fall back to the submission's trace). A message to
an agent carries the context of the span that sent it in its envelope's `traceContext`, so
the agent's spans are children of the hub's.

    hub.submit                  SERVER; children hub.submit.validate, .convert, .store
    hub.dispatch                an offer decision: generation, mode, bound, the placement
                                verdict of every cluster (multiq.verdict.<cluster>)
      hub.offer                 PRODUCER, one per cluster offered (its context rides along)
    hub.wait                    a Waiting decision written (reason, message)
    hub.report                  CONSUMER: an agent's report applied (phase, accepted)
      hub.bind / hub.withdraw   PRODUCER: what the report made the hub send

The pure cycle decides and this module only describes its decisions (`OfferDecision` carries
the verdicts as data). With tracing off (no exporter, telemetry.tracing) every method returns
before building anything; the submission still keeps a valid incoming `traceparent` in the
annotation, so a trace started by the caller can be continued by the agents.

Called by: hub.http.submit (`traced_submission`, `submission_stage`, `keep_trace`),
hub.dispatch and hub.answers (`HubTracing`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry import context as otel_context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, get_current_span

from api.tracecontext import TRACEPARENT_ANNOTATION, TRACEPARENT_HEADER, TraceParent, parse
from api.v1alpha1.messages import TraceContext, WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Workload
from hub.placement.cycle import OfferDecision, Wait
from telemetry.tracing import context_of, traceparent_of, tracer

__all__ = [
    "HubTracing",
    "OfferSpans",
    "ReportSpan",
    "keep_trace",
    "submission_stage",
    "traced_submission",
    "workload_traceparent",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SUBMISSION_STAGES = ("validate", "convert", "store")


def workload_traceparent(wl: Workload | None) -> str | None:
    """The context a workload's spans continue (its submission's), if it has one."""
    if wl is None:
        return None
    return wl.metadata.annotations.get(TRACEPARENT_ANNOTATION)


def _message_context(span: Span) -> TraceContext | None:
    parent = traceparent_of(span)
    return TraceContext(traceparent=parent) if parent is not None else None


# --- the submission ---------------------------------------------------------------------------


@dataclass
class _Submission:
    incoming: TraceParent | None
    span: Span | None
    started_ns: int
    marks: list[tuple[str, int]] = field(default_factory=list)


_SUBMISSION: ContextVar[_Submission | None] = ContextVar("multiq_submission", default=None)


def traced_submission(handler: Handler, tracer_: Tracer | None = None) -> Handler:
    """`handler` inside a `hub.submit` span continuing the request's `traceparent`; the
    stages it marks (`submission_stage`) become child spans when it returns."""
    chosen = tracer_ if tracer_ is not None else tracer("multiq.hub")

    async def traced(request: web.Request) -> web.StreamResponse:
        incoming = parse(request.headers.get(TRACEPARENT_HEADER))
        if chosen is None:
            token = _SUBMISSION.set(_Submission(incoming, None, 0))
            try:
                return await handler(request)
            finally:
                _SUBMISSION.reset(token)
        attributes = {
            "http.request.method": request.method,
            "url.path": request.path,
            "multiq.namespace": request.match_info.get("ns", ""),
        }
        with chosen.start_as_current_span(
            "hub.submit",
            context=context_of(incoming),
            kind=SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            submission = _Submission(incoming, span, time.time_ns())
            token = _SUBMISSION.set(submission)
            try:
                response = await handler(request)
            except Exception as exc:
                status = getattr(exc, "status", 500)
                span.set_attribute("http.response.status_code", status)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise
            else:
                span.set_attribute("http.response.status_code", response.status)
                return response
            finally:
                _SUBMISSION.reset(token)
                _stage_spans(chosen, submission)

    return traced


def submission_stage(name: str) -> None:
    """Mark the end of a stage of the current submission (it began where the last ended)."""
    submission = _SUBMISSION.get()
    if submission is not None and submission.span is not None:
        submission.marks.append((name, time.time_ns()))


def keep_trace(wl: Workload) -> None:
    """Write the submission's context into the workload (before it is stored), so its later
    spans continue it: the `hub.submit` span's, or without tracing the caller's header."""
    submission = _SUBMISSION.get()
    if submission is None:
        return
    parent = traceparent_of(submission.span) if submission.span is not None else None
    if parent is None and submission.incoming is not None:
        parent = submission.incoming.format()
    if parent is not None:
        wl.metadata.annotations[TRACEPARENT_ANNOTATION] = parent
    if submission.span is not None:
        submission.span.set_attribute(
            "multiq.workload", f"{wl.metadata.namespace}/{wl.metadata.name}"
        )


def _stage_spans(chosen: Tracer, submission: _Submission) -> None:
    assert submission.span is not None
    parent = context_of(traceparent_of(submission.span))
    begun = submission.started_ns
    for name, ended in submission.marks:
        chosen.start_span(f"hub.submit.{name}", context=parent, start_time=begun).end(ended)
        begun = ended


# --- dispatch, messages, reports ----------------------------------------------------------------


class HubTracing:
    """Spans of the dispatch shell and the agents' answers; all no-ops without a tracer."""

    def __init__(self, tracer_: Tracer | None = None) -> None:
        self.tracer = tracer_ if tracer_ is not None else tracer("multiq.hub")
        self._generations: dict[str, tuple[int, str]] = {}
        """Workload key → (generation, traceparent of its trace) for generations after the
        first, until the workload finishes."""

    @property
    def enabled(self) -> bool:
        return self.tracer is not None

    @contextlib.contextmanager
    def dispatching(self, offer: OfferDecision) -> Iterator[OfferSpans]:
        """Around making an offer durable and sending it: `hub.dispatch`, and a `hub.offer`
        per cluster whose context the offer carries."""
        if self.tracer is None:
            yield OfferSpans(None)
            return
        attributes: dict[str, str | int | bool | list[str]] = {
            "multiq.workload": offer.key,
            "multiq.generation": offer.generation,
            "multiq.dispatch.mode": offer.mode,
            "multiq.dispatch.bound": offer.bound,
            "multiq.dispatch.clusters": list(offer.clusters),
        }
        for cluster, verdict, message in offer.verdicts:
            attributes[f"multiq.verdict.{cluster}"] = f"{verdict}: {message}"
        submission = context_of(workload_traceparent(offer.workload))
        if offer.generation <= 1:
            with self.tracer.start_as_current_span(
                "hub.dispatch", context=submission, attributes=attributes
            ) as span:
                yield OfferSpans(self.tracer, span)
            return
        # A generation after the first: a trace of its own, linked to the submission.
        links = []
        if submission is not None:
            links = [Link(get_current_span(submission).get_span_context())]
        with self.tracer.start_as_current_span(
            "hub.dispatch", context=otel_context.Context(), attributes=attributes, links=links
        ) as span:
            generation_trace = traceparent_of(span)
            if generation_trace is not None:
                self._generations[offer.key] = (offer.generation, generation_trace)
            yield OfferSpans(self.tracer, span, generation_trace)

    def _generation_trace(self, key: str, generation: int) -> str | None:
        remembered = self._generations.get(key)
        return remembered[1] if remembered and remembered[0] == generation else None

    def waiting(self, wait: Wait, wl: Workload | None) -> None:
        if self.tracer is None or wl is None:
            return
        attributes = {
            "multiq.workload": wait.key,
            "multiq.wait.reason": wait.reason,
            "multiq.wait.message": wait.message,
        }
        parent = context_of(workload_traceparent(wl))
        self.tracer.start_span("hub.wait", context=parent, attributes=attributes).end()

    @contextlib.contextmanager
    def report(
        self,
        cluster: str,
        report: WorkloadStatusReport,
        wl: Workload | None,
        trace_context: TraceContext | None,
    ) -> Iterator[ReportSpan]:
        """Around applying an agent's report (Pending ones, frequent and uneventful, have
        none): `hub.report`, a child of the agent's span when the envelope names one."""
        if self.tracer is None or report.phase is WorkloadPhase.PENDING:
            yield ReportSpan(None)
            return
        parent = context_of(trace_context.traceparent if trace_context else None)
        if parent is None:
            parent = context_of(self._generation_trace(report.workload, report.generation))
        if parent is None:
            parent = context_of(workload_traceparent(wl))
        if report.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
            self._generations.pop(report.workload, None)  # (its last report)
        attributes: dict[str, str | int] = {
            "multiq.workload": report.workload,
            "multiq.cluster": cluster,
            "multiq.generation": report.generation,
            "multiq.phase": report.phase.value,
        }
        with self.tracer.start_as_current_span(
            "hub.report", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        ) as span:
            yield ReportSpan(self.tracer, span)


@dataclass
class OfferSpans:
    tracer: Tracer | None
    span: Span | None = None
    generation_trace: str | None = None
    """For a generation after the first: its own trace, for the offer's workload annotation
    (the agent's spans of this generation join it)."""

    def offered(self, wl: Workload) -> Workload:
        """The workload as the offer carries it: with this generation's trace, if it has one
        of its own (a copy: the hub's mirror keeps the submission's)."""
        if self.generation_trace is None:
            return wl
        meta = wl.metadata.model_copy(
            update={
                "annotations": {
                    **wl.metadata.annotations,
                    TRACEPARENT_ANNOTATION: self.generation_trace,
                }
            }
        )
        return wl.model_copy(update={"metadata": meta})

    def offer(self, cluster: str) -> TraceContext | None:
        """A `hub.offer` span for `cluster`, ended at once; its context for the envelope."""
        if self.tracer is None:
            return None
        with self.tracer.start_as_current_span(
            "hub.offer", kind=SpanKind.PRODUCER, attributes={"multiq.cluster": cluster}
        ) as span:
            return _message_context(span)

    def lost_race(self) -> None:
        if self.span is not None:
            self.span.set_attribute("multiq.dispatch.written", False)


@dataclass
class ReportSpan:
    tracer: Tracer | None
    span: Span | None = None

    def outcome(self, accepted: bool, refusal: str | None) -> None:
        if self.span is None:
            return
        self.span.set_attribute("multiq.report.accepted", accepted)
        if refusal:
            self.span.set_attribute("multiq.report.refusal", refusal)

    def sending(self, what: str, cluster: str) -> TraceContext | None:
        """A `hub.bind` or `hub.withdraw` span for a message this report makes the hub send."""
        if self.tracer is None:
            return None
        with self.tracer.start_as_current_span(
            f"hub.{what}", kind=SpanKind.PRODUCER, attributes={"multiq.cluster": cluster}
        ) as span:
            return _message_context(span)
