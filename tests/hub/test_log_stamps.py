"""Log stamps across versions: the hub takes an older agent's datetime JSON and stores and
sends it in the canonical form; it refuses a frame with a malformed stamp, naming the line;
and what a current agent sends parses as the same times where an older hub reads a
datetime."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from api.v1alpha1.messages import Envelope, LogData, LogLine, MessageInvalidError
from hub.loghub import encode_lines


def envelope(stamps: list[str | None]) -> str:
    """A LogData envelope as an agent writes it, with these stamps on its lines."""
    lines = [
        {"text": f"line {n}", **({"timestamp": stamp} if stamp else {})}
        for n, stamp in enumerate(stamps)
    ]
    payload = {
        "type": "LogData",
        "streamId": "s",
        "workload": "vision/train",
        "cluster": "west",
        "pod": "train-0",
        "container": "main",
        "lines": lines,
        "seq": 1,
        "fromStart": True,
    }
    return json.dumps({"protocolVersion": 2, "type": "LogData", "seq": 1, "payload": payload})


def received(stamps: list[str | None]) -> LogData:
    data, unknown = Envelope.decode_from_peer(envelope(stamps))
    assert not unknown and isinstance(data.payload, LogData)
    return data.payload


def test_an_older_agents_stamps_are_stored_and_sent_canonical() -> None:
    # pydantic's datetime JSON: "Z", a fraction without trailing zeros or none at all.
    data = received(
        ["2026-12-04T10:00:00.5Z", "2026-12-04T10:00:00Z", None, "2026-12-04T11:00:00.25+01:00"]
    )
    want = [
        "2026-12-04T10:00:00.500000+00:00",
        "2026-12-04T10:00:00.000000+00:00",
        None,
        "2026-12-04T10:00:00.250000+00:00",
    ]
    assert [line.timestamp for line in data.lines] == want
    sent = [json.loads(line).get("time") for line in encode_lines("west", data).splitlines()]
    assert sent == want


def test_a_current_agents_stamps_are_taken_as_they_are() -> None:
    stamps = ["2026-12-04T10:00:00.000001+00:00", "2026-12-04T10:00:00.000001+00:00"]
    assert [line.timestamp for line in received([*stamps]).lines] == stamps


@pytest.mark.parametrize("bad", ["2026-12-04 noon", "2026-12-04T10:00:00.123456+0000", ""])
def test_a_frame_with_a_malformed_stamp_is_refused_naming_the_line(bad: str) -> None:
    with pytest.raises(MessageInvalidError, match=r"lines\[1\]\.timestamp: not an RFC 3339"):
        Envelope.decode(envelope(["2026-12-04T10:00:00.000001+00:00", bad or " "]))


class OlderHubsLogLine(BaseModel):
    """LogLine as a hub before the canonical stamps reads it."""

    timestamp: datetime | None = None
    text: str


def test_an_older_hub_reads_a_current_agents_stamps_as_the_same_times() -> None:
    when = datetime(2026, 12, 4, 10, 0, 0, 120, tzinfo=UTC)
    line = LogLine(timestamp="2026-12-04T10:00:00.000120+00:00", text="x")
    older = OlderHubsLogLine.model_validate_json(line.model_dump_json())
    assert older.timestamp == when
