"""The deep-queue benchmark refuses a queue its window could drain: it would report 0
admissions per second for a queue that was never deep."""

from __future__ import annotations

import pytest

from bench.agent_deep_queue import main, shallowest_queue


def test_the_shallowest_queue_is_the_room_and_a_window_at_the_ideal_rate() -> None:
    assert shallowest_queue(3.0) == 32 + 96


def test_a_queue_the_window_could_drain_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--queued", "20", "--window", "3"])
    assert exited.value.code == 2
    assert "--queued must be more than 128 for a 3.0 s window" in capsys.readouterr().err
