"""Tracing is chosen by the standard OTEL_* variables: none by default (no provider, so the
shells build no span), a clear error for an exporter or protocol it cannot use; and a
`traceparent` becomes an OpenTelemetry parent and back unchanged."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from telemetry.tracing import TracingConfigError, configure_tracing, context_of, traceparent_of

GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_no_exporter_configured_installs_no_provider() -> None:
    assert configure_tracing("multiq-test", {}) is None
    assert configure_tracing("multiq-test", {"OTEL_TRACES_EXPORTER": "none"}) is None


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
    ],
)
def test_an_exporter_it_cannot_use_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(TracingConfigError):
        configure_tracing("multiq-test", environ)


def test_a_span_started_under_a_traceparent_continues_its_trace() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("child", context=context_of(GOOD)) as span:
        own = traceparent_of(span)
    assert own is not None
    assert own.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")
    assert own != GOOD
    assert isinstance(span, ReadableSpan)
    assert span.parent is not None
    assert span.parent.span_id == 0x00F067AA0BA902B7


def test_a_malformed_traceparent_gives_no_parent() -> None:
    assert context_of("00-nonsense") is None
    assert context_of(None) is None
