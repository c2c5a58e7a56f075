"""JSON log lines: one object a line with time, level, logger and message, and the trace and
span ids of the span current when the line was logged (none outside a span)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from telemetry.logs import JsonFormatter


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("multiq.test.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def _records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_logged_in_a_span_carries_its_trace_and_span_ids(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = lines
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        logger.info("offered %s to %s", "default/train", "east")
    (line,) = _records(out)
    context = span.get_span_context()
    assert line["trace_id"] == f"{context.trace_id:032x}"
    assert line["span_id"] == f"{context.span_id:016x}"
    assert line["message"] == "offered default/train to east"
    assert line["level"] == "INFO"
    assert line["logger"] == "multiq.test.json"
    assert str(line["time"]).endswith("+00:00")


def test_a_line_logged_outside_any_span_has_no_trace_ids(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = lines
    logger.warning("cluster %s lost", "west")
    (line,) = _records(out)
    assert "trace_id" not in line
    assert "span_id" not in line
    assert line["level"] == "WARNING"


def test_an_exception_is_kept_in_its_line(lines: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = lines
    try:
        raise ValueError("bad quantity")
    except ValueError:
        logger.exception("cannot apply")
    (line,) = _records(out)
    assert "ValueError: bad quantity" in str(line["exception"])
    assert line["message"] == "cannot apply"
