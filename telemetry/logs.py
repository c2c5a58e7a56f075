"""Log lines for people (`text`, the default) or for collectors (`json`: one object a line
with time, level, logger, message, and trace_id/span_id while a span is current, so a log
line leads to its trace).

    multiq-hub --log-format json      multiq-agent --log-format json

Called by: hub.main, agent.main (`configure_logging`); tests.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

__all__ = ["LOG_FORMATS", "JsonFormatter", "LogFormat", "configure_logging"]

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; ids as OpenTelemetry and W3C write them (lower-case hex,
    32 and 16 digits)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = f"{span.trace_id:032x}"
            line["span_id"] = f"{span.span_id:016x}"
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str | int, log_format: LogFormat = "text") -> None:
    """The root logger at `level`, writing to stderr in `log_format`."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
