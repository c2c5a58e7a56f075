"""A container's log is kept as a kubelet keeps its current log file: up to 10 MiB, the
oldest lines rotated away in one cut; `timestamps=true` stamps are RFC 3339 with
microseconds."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys

from kubesim.kubelet.process import _copy_lines
from kubesim.logs import _MAX_BYTES, _ROTATED_TO, ContainerLog, LogLine, _stamp


def test_a_log_keeps_ten_mib_and_rotates_the_oldest_lines_away_at_once() -> None:
    log = ContainerLog()
    line = b"x" * 99 + b"\n"
    fits = _MAX_BYTES // len(line)
    for _ in range(fits):
        log.append(line)
    assert (len(log.lines), log.dropped) == (fits, 0)
    log.append(line)
    assert log.size <= _ROTATED_TO
    assert log.dropped + len(log.lines) == fits + 1
    assert log.size == len(log.lines) * len(line)


def test_a_lines_stamp_is_rfc3339_with_microseconds_in_utc() -> None:
    at = dt.datetime(2026, 12, 4, 9, 5, 7, 1234, tzinfo=dt.UTC)
    assert _stamp(at) == b"2026-12-04T09:05:07.001234Z "
    assert LogLine(at, b"hello\n", _stamp(at)).stamped() == b"2026-12-04T09:05:07.001234Z hello\n"


async def test_a_follower_gets_what_is_there_in_one_batch_then_what_comes() -> None:
    log = ContainerLog()
    for n in range(3):
        log.append(f"line {n}".encode())
    batches: list[list[bytes]] = []

    async def follow() -> None:
        async for batch in log.follow(0):
            batches.append([line.text for line in batch])

    task = asyncio.create_task(follow())
    await asyncio.sleep(0)
    log.append(b"line 3")
    log.finish()
    await asyncio.wait_for(task, 5)
    assert batches == [[b"line 0\n", b"line 1\n", b"line 2\n"], [b"line 3\n"]]


PIECES = """
import sys, time
for n in range(3):
    sys.stdout.write(f"line {n}\\npart")
    sys.stdout.flush()
    time.sleep(0.05)
    sys.stdout.write(f"ial {n}\\n\\n")
    sys.stdout.flush()
sys.stdout.write("x" * 70000 + "\\nlast")
"""


async def test_output_read_in_pieces_is_kept_as_whole_lines_in_order() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PIECES, stdout=asyncio.subprocess.PIPE
    )
    log = ContainerLog()
    await _copy_lines(process, log)
    await process.wait()
    texts = [line.text for line in log.lines]
    assert texts[:9] == [
        t for n in range(3) for t in (f"line {n}\n".encode(), f"partial {n}\n".encode(), b"\n")
    ]
    assert texts[-1] == b"last\n"
    # A line longer than a read may be cut into several, none lost.
    assert all(t.endswith(b"\n") for t in texts)
    assert b"".join(t[:-1] for t in texts[9:-1]) == b"x" * 70000
    assert log.size == sum(len(t) for t in texts)
