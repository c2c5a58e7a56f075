"""OpenTelemetry for a MultiQ process: the tracer provider from the standard environment
variables, and the conversions between a W3C `traceparent` and OpenTelemetry contexts.

    OTEL_TRACES_EXPORTER          otlp | console | none (the default: no provider, no spans)
    OTEL_EXPORTER_OTLP_PROTOCOL   http/protobuf (default) | grpc  (…_TRACES_PROTOCOL first)
    OTEL_EXPORTER_OTLP_ENDPOINT   read by the exporter itself (…_TRACES_ENDPOINT first)
    OTEL_SERVICE_NAME             default: the process's own (multiq-hub, multiq-agent)
    OTEL_BSP_SCHEDULE_DELAY, …    read by the BatchSpanProcessor

With no exporter configured `configure_tracing` installs nothing and `tracer` answers None:
the hub's and the agent's tracing shells then return before building any attribute, so
tracing costs a check per event.

Called by: hub.main, agent.main (`configure_tracing`); hub.tracing and agent.tracing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags

from api.tracecontext import TraceParent, parse

__all__ = [
    "TracingConfigError",
    "configure_tracing",
    "context_of",
    "traceparent_of",
    "tracer",
]

log = logging.getLogger(__name__)


class TracingConfigError(ValueError):
    """An OTEL_* variable names an exporter or protocol this process cannot use."""


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter | None:
    if name == "none":
        return None
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        raise TracingConfigError(f"OTEL_TRACES_EXPORTER={name!r}: use otlp, console or none")
    protocol = environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    )
    # Imported only when chosen: each pulls in its transport (requests, or grpc).
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter()
    raise TracingConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use http/protobuf or grpc")


def configure_tracing(
    service_name: str, environ: Mapping[str, str] = os.environ
) -> TracerProvider | None:
    """Install the global tracer provider the environment asks for; None when it asks for
    none (the default). The provider flushes its spans when the process exits."""
    names = [
        n.strip().lower()
        for n in environ.get("OTEL_TRACES_EXPORTER", "none").split(",")
        if n.strip()
    ]
    exporters = [e for e in (_exporter(n, environ) for n in names) if e is not None]
    if not exporters:
        return None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing: exporting spans with %s", ", ".join(names))
    return provider


def tracer(name: str) -> trace.Tracer | None:
    """The installed provider's tracer, or None when tracing is off."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return None
    return provider.get_tracer(name)


def context_of(parent: TraceParent | str | None) -> otel_context.Context | None:
    """An OpenTelemetry context whose current span is the remote `parent` (None: none, or a
    header that breaks the rules)."""
    if isinstance(parent, str) or parent is None:
        parent = parse(parent)
    if parent is None:
        return None
    span_context = SpanContext(
        trace_id=parent.trace_id,
        span_id=parent.span_id,
        is_remote=True,
        trace_flags=TraceFlags(parent.flags & 0xFF),
    )
    return trace.set_span_in_context(NonRecordingSpan(span_context))


def traceparent_of(span: Span) -> str | None:
    """The `traceparent` naming `span` as parent; None for a span that is not valid (the
    no-op tracer's)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return TraceParent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags)).format()
