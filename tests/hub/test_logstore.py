"""The hub's durable log store: lines written once whichever streams bring them, read back
interleaved by time, kept across a reopening, removed by age and size."""

from __future__ import annotations

import os
from pathlib import Path

from hub.logstore import LogStore, StoredLine, StreamName

POD_A = StreamName("vision/train", 1, "west", "train-a", "main")
POD_B = StreamName("vision/train", 1, "west", "train-b", "main")


def lines(first: int, last: int, *, stamp: str = "") -> list[StoredLine]:
    """Lines `first`..`last`, each at second n (or all at `stamp`)."""
    return [
        StoredLine(f"line {n}", stamp or f"2026-12-04T10:00:{n:02d}.000000+00:00")
        for n in range(first, last + 1)
    ]


def texts(store: LogStore, **kw: object) -> list[str]:
    return [r["line"] for r in store.read("vision/train", **kw) if "line" in r]  # type: ignore[arg-type]


def test_a_streams_consecutive_frames_are_stored_as_they_come(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    assert store.append(POD_A, "s1", 1, lines(1, 3)) == 3
    assert store.append(POD_A, "s1", 4, lines(4, 5)) == 2
    assert texts(store) == [f"line {n}" for n in range(1, 6)]
    assert [r["seq"] for r in store.read("vision/train")] == [1, 2, 3, 4, 5]


def test_what_a_second_follower_or_a_ship_repeats_is_written_once(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    store.append(POD_A, "s1", 1, lines(1, 4))
    # A second stream from the log's start: only what the first did not bring is new.
    assert store.append(POD_A, "ship/1", 1, lines(1, 3)) == 0
    assert store.append(POD_A, "ship/1", 4, lines(4, 6)) == 2
    assert texts(store) == [f"line {n}" for n in range(1, 7)]


def test_lines_sharing_a_timestamp_are_told_apart_by_how_many_are_stored(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    same = "2026-12-04T10:00:00.000001+00:00"
    store.append(POD_A, "s1", 1, lines(1, 2, stamp=same))
    # Another stream brings the same two and a third with that very timestamp.
    assert store.append(POD_A, "s2", 1, lines(1, 3, stamp=same)) == 1
    assert texts(store) == ["line 1", "line 2", "line 3"]


def test_a_store_opened_again_on_its_directory_goes_on_where_it_ended(tmp_path: Path) -> None:
    LogStore(tmp_path).append(POD_A, "s1", 1, lines(1, 3))
    again = LogStore(tmp_path)
    assert again.append(POD_A, "s1", 4, lines(2, 5)) == 2
    assert texts(again) == [f"line {n}" for n in range(1, 6)]
    assert [r["seq"] for r in again.read("vision/train")] == [1, 2, 3, 4, 5]


def test_containers_are_read_interleaved_by_time_each_in_order(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    store.append(POD_A, "s1", 1, [lines(1, 1)[0], lines(3, 3)[0]])
    store.append(POD_B, "s1", 1, [lines(2, 2)[0], lines(4, 4)[0]])
    records = store.read("vision/train")
    assert [(r["pod"], r["line"]) for r in records] == [
        ("train-a", "line 1"),
        ("train-b", "line 2"),
        ("train-a", "line 3"),
        ("train-b", "line 4"),
    ]
    assert texts(store, pod="train-b") == ["line 2", "line 4"]
    assert texts(store, tail_lines=2) == ["line 3", "line 4"]
    assert texts(store, since="2026-12-04T10:00:03.000000+00:00") == ["line 3", "line 4"]


def test_a_read_up_to_the_counts_taken_leaves_out_what_was_appended_since(
    tmp_path: Path,
) -> None:
    store = LogStore(tmp_path)
    store.append(POD_A, "s1", 1, lines(1, 4))
    store.append(POD_B, "s1", 1, lines(1, 2))
    counts = store.counts("vision/train", 1)
    assert counts == {("west", "train-a", "main"): 4, ("west", "train-b", "main"): 2}
    store.append(POD_A, "s1", 5, lines(5, 6))
    store.append(POD_B, "s1", 3, lines(3, 3))
    read = store.read("vision/train", generation=1, upto=counts)
    assert sorted((r["pod"], r["seq"]) for r in read) == [
        *(("train-a", n) for n in range(1, 5)),
        *(("train-b", n) for n in range(1, 3)),
    ]
    only_a = store.read("vision/train", generation=1, upto={("west", "train-a", "main"): 1})
    assert [(r["pod"], r["seq"]) for r in only_a] == [("train-a", 1)]


def test_a_read_while_a_line_is_being_appended_gives_the_whole_lines_before_it(
    tmp_path: Path,
) -> None:
    # The log route reads in a worker thread while the event loop may be appending: the
    # bytes of a write in progress are never read as a line.
    store = LogStore(tmp_path)
    store.append(POD_A, "s1", 1, lines(1, 2))
    with POD_A.path(tmp_path).open("a", encoding="utf-8") as f:
        f.write("3\t2026-12-04T10:00:03.000000+00:00\tline 3 half wr")
    assert texts(store) == ["line 1", "line 2"]


def test_a_marker_is_read_back_in_place_as_a_note(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    store.append(POD_A, "ship/1", 1, lines(1, 2))
    store.mark(POD_A, "multiq: 7 lines (700 bytes) of pod/train-a container main not kept")
    records = store.read("vision/train")
    assert records[-1]["event"] == "note" and "7 lines" in records[-1]["message"]
    assert [r.get("line") for r in records[:2]] == ["line 1", "line 2"]


def test_the_latest_generation_is_read_and_completeness_is_per_generation(tmp_path: Path) -> None:
    store = LogStore(tmp_path)
    store.append(POD_A, "s1", 1, lines(1, 1))
    second = StreamName("vision/train", 2, "east", "train-c", "main")
    store.append(second, "s2", 1, lines(9, 9))
    assert texts(store) == ["line 9"]
    assert texts(store, generation=1) == ["line 1"]
    store.complete("vision/train", 2)
    assert store.is_complete("vision/train", 2) and not store.is_complete("vision/train", 1)


def test_generations_past_the_age_limit_go_then_the_oldest_while_over_the_size_limit(
    tmp_path: Path,
) -> None:
    now = [0.0]
    store = LogStore(tmp_path, max_age_seconds=3600, max_bytes=10**9, clock=lambda: now[0])
    old = StreamName("vision/old", 1, "west", "p", "main")
    new = StreamName("vision/new", 1, "west", "p", "main")
    store.append(old, "s", 1, lines(1, 50))
    store.append(new, "s", 1, lines(1, 50))
    old_dir = old.directory(tmp_path)
    for f in old_dir.iterdir():
        os.utime(f, (1000.0, 1000.0))
    now[0] = (new.path(tmp_path).stat().st_mtime) + 60
    assert store.sweep() == 1
    assert not old_dir.exists()
    assert store.read("vision/new")
    # Over the size limit: the oldest goes even though it is young.
    store.max_bytes = 1
    assert store.sweep() == 1
    assert store.read("vision/new") == []
