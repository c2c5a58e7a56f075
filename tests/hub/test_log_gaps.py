"""What a log follower is told: lines dropped from its queue (it read too slowly), per
container and exactly how many; lines its cluster never sent (a gap in the numbering); and
nothing else — a drop is never reported twice as a gap."""

from __future__ import annotations

import json
from typing import Any

from api.v1alpha1.messages import LogData, LogLine
from hub.loghub import _Frame, _notes, _Stream, encode_lines


def frame(pod: str, seq: int, count: int) -> _Frame:
    data = LogData(
        stream_id="s",
        workload="vision/train",
        cluster="west",
        pod=pod,
        container="main",
        lines=[LogLine(text=f"{pod} {n}") for n in range(seq, seq + count)],
        seq=seq,
        from_start=True,
    )
    return _Frame(data, encode_lines("west", data))


def deliver(stream: _Stream, expected: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while stream.queue:
        data = stream.queue.popleft()
        assert data is not None
        out += list(_notes("west", stream, data.data, expected))
        out += [json.loads(line) for line in data.encoded.decode().splitlines()]
    return out


def test_a_follower_that_keeps_up_gets_every_line_numbered_and_no_notice() -> None:
    stream = _Stream("west", "vision/train", limit_bytes=1 << 20)
    expected: dict[tuple[str, str], int] = {}
    for seq in (1, 4, 7):
        assert stream.put(frame("a", seq, 3)) == 0
    records = deliver(stream, expected)
    assert [r["seq"] for r in records] == list(range(1, 10))
    assert all("event" not in r for r in records)


def test_a_slow_follower_is_told_per_container_how_many_lines_it_lost_and_why() -> None:
    stream = _Stream("west", "vision/train", limit_bytes=3 * 100 * 60)
    expected: dict[tuple[str, str], int] = {}
    lost = 0
    for n in range(6):
        lost += stream.put(frame("a" if n % 2 == 0 else "b", 1 + (n // 2) * 100, 100))
    assert lost > 0
    records = deliver(stream, expected)
    notices = [r for r in records if r.get("event") == "dropped"]
    assert sum(r["count"] for r in notices) == lost
    assert {r["reason"] for r in notices} == {"follower too slow"}
    assert all(r["message"].startswith("multiq: ") for r in notices)
    assert "container main dropped: follower too slow" in notices[0]["message"]
    # Every line is either delivered or counted, never both, and none is reported as a gap.
    delivered = [r for r in records if "line" in r]
    assert len(delivered) + lost == 600
    for pod in ("a", "b"):
        seqs = [r["seq"] for r in delivered if r["pod"] == pod]
        assert seqs == sorted(seqs) and seqs[-1] == 300


def test_lines_the_cluster_never_sent_are_counted_as_a_gap() -> None:
    stream = _Stream("west", "vision/train", limit_bytes=1 << 20)
    expected: dict[tuple[str, str], int] = {}
    stream.put(frame("a", 1, 10))
    stream.put(frame("a", 26, 5))  # 11..25 never came
    records = deliver(stream, expected)
    gaps = [r for r in records if r.get("event") == "dropped"]
    assert [(g["count"], g["reason"]) for g in gaps] == [(15, "not read from the cluster")]
    assert records.index(gaps[0]) == 10  # in place: after line 10, before line 26


def test_a_lines_text_reaches_the_reader_as_written_whatever_it_holds() -> None:
    texts = ['say "hi", "there"', '","', "\\", "", "tab\there, nul\x00, é, 日本", '"', "x"]
    data = LogData(
        stream_id="s",
        workload="vision/train",
        cluster="west",
        pod="p",
        container="main",
        lines=[LogLine(text=text) for text in texts],
        seq=1,
    )
    records = [json.loads(line) for line in encode_lines("west", data).decode().splitlines()]
    assert [r["line"] for r in records] == texts
    assert [r["seq"] for r in records] == list(range(1, len(texts) + 1))
