"""One trace per workload, from `qctl submit` to its end, across real processes: the hub and
the agents export their spans over OTLP/HTTP (protobuf) to a receiver in this test, chosen
by the standard OTEL_* environment variables, and the span tree of a workload that ran on a
member cluster is checked — one trace id from qctl's `traceparent` on, every parent right.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from api.tracecontext import parse
from e2e.conftest import qctl
from e2e.test_federation import sleeper_job
from qctl.commands.dev import DevFederation


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    """An OTLP/HTTP trace receiver (POST /v1/traces, protobuf) on a loopback port, in a
    thread of its own; it keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self.spans += received
            self.requests += 1
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type="application/x-protobuf")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = self._runner.addresses[0][1]
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        runner = self._runner

        async def cleanup() -> None:
            if runner is not None:
                await runner.cleanup()
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(cleanup(), self._loop)
        self._thread.join(10)
        self._loop.close()

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    otlp = OtlpReceiver()
    otlp.start()
    try:
        yield otlp
    finally:
        otlp.stop()


@pytest.fixture
def traced_federation(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DevFederation]:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # milliseconds: spans arrive soon
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    fed = DevFederation(tmp_path / "fed", clusters=2, nodes=2, runtime="process", port=0)
    try:
        fed.start(detach=False)
        yield fed
    finally:
        fed.stop()


CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _wait_for_spans(
    receiver: OtlpReceiver, trace_id: str, names: set[str], within: float = 90.0
) -> list[ReceivedSpan]:
    deadline = time.monotonic() + within
    while True:
        spans = receiver.of_trace(trace_id)
        if names <= {s.name for s in spans}:
            return spans
        if time.monotonic() > deadline:
            raise AssertionError(f"spans missing: {sorted(names - {s.name for s in spans})}")
        time.sleep(0.2)


def test_a_workload_that_ran_on_a_member_cluster_is_one_trace_from_qctl_to_its_end(
    traced_federation: DevFederation,
    receiver: OtlpReceiver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caller = parse(CALLER)
    assert caller is not None
    trace_id = f"{caller.trace_id:032x}"
    monkeypatch.setenv("TRACEPARENT", CALLER)  # qctl continues the caller's trace

    qctl(traced_federation, "submit", "-f", str(sleeper_job(tmp_path, "traced", 2)))

    spans = _wait_for_spans(
        receiver,
        trace_id,
        {
            "hub.submit",
            "hub.submit.validate",
            "hub.submit.convert",
            "hub.submit.store",
            "hub.dispatch",
            "hub.offer",
            "agent.offer",
            "agent.admission",
            "agent.materialize",
            "agent.pod_running",
            "agent.finish",
            "hub.report",
        },
    )
    by_name: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (submit,) = by_name["hub.submit"]
    assert submit.service == "multiq-hub"
    assert submit.parent_span_id == f"{caller.span_id:016x}"
    assert submit.attributes["multiq.workload"] == "default/job-traced"
    assert submit.attributes["http.response.status_code"] == 201
    for stage in ("validate", "convert", "store"):
        (child,) = by_name[f"hub.submit.{stage}"]
        assert child.parent_span_id == submit.span_id

    # Later spans continue the submission, whichever process starts them.
    (dispatch,) = by_name["hub.dispatch"]
    assert dispatch.parent_span_id == submit.span_id
    assert dispatch.attributes["multiq.generation"] == 1
    assert dispatch.attributes["multiq.dispatch.mode"] == "BestFit"
    cluster = dispatch.attributes["multiq.dispatch.clusters"][0]
    verdicts = {k for k in dispatch.attributes if k.startswith("multiq.verdict.")}
    assert verdicts == {f"multiq.verdict.{name}" for name in traced_federation.names}
    assert dispatch.attributes[f"multiq.verdict.{cluster}"].startswith("Candidate")

    # The offer's context crossed the WebSocket in its envelope.
    (offer,) = by_name["hub.offer"]
    assert offer.parent_span_id == dispatch.span_id
    assert offer.attributes["multiq.cluster"] == cluster
    (received,) = by_name["agent.offer"]
    assert received.service == "multiq-agent"
    assert received.parent_span_id == offer.span_id
    assert received.attributes["multiq.cluster"] == cluster

    for name in ("agent.admission", "agent.materialize", "agent.pod_running", "agent.finish"):
        (span,) = by_name[name]
        assert span.service == "multiq-agent", name
        assert span.parent_span_id == submit.span_id, name
        assert span.attributes["multiq.cluster"] == cluster, name
    assert by_name["agent.finish"][0].attributes["multiq.phase"] == "Succeeded"
    assert by_name["agent.materialize"][0].attributes["multiq.jobs"]
    assert by_name["agent.admission"][0].attributes["multiq.admission.reservation"] is False

    deadline = time.monotonic() + 30
    while True:
        reports = [s for s in receiver.of_trace(trace_id) if s.name == "hub.report"]
        phases = {s.attributes["multiq.phase"] for s in reports}
        if "Succeeded" in phases or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    # Admitted goes with Running when the pods start soon (one report), or alone.
    assert "Succeeded" in phases and phases & {"Admitted", "Running"}
    assert phases <= {"Admitted", "Running", "Succeeded"}
    assert all(s.parent_span_id == submit.span_id for s in reports)
    assert all(s.attributes["multiq.report.accepted"] for s in reports)
    # Every span of the workload is in the one trace.
    ids = {s.span_id for s in receiver.of_trace(trace_id)}
    others = [
        s
        for s in receiver.spans
        if s.attributes.get("multiq.workload") == "default/job-traced" and s.span_id not in ids
    ]
    assert others == []
