"""What the hub and the agent share to be observed: an OpenTelemetry tracer provider set up
from the standard OTEL_* environment variables (telemetry.tracing) and log lines as JSON
carrying the current trace and span ids (telemetry.logs).

One module each, imported by both (hub and agent are otherwise independent); qctl imports
none of it (it sends a `traceparent` header built by api.tracecontext, without OpenTelemetry).
"""
