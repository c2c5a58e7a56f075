"""The idle bench: a process's CPU, its threads' and its voluntary context switches read from
/proc and turned into figures a second per role, the windows it refuses, and a small
federation measured idle before and after a burst."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from contextlib import redirect_stdout

import pytest

from bench.federation_idle import Usage, main, per_second, read_usage


def _spin(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_busy_thread_shows_in_its_process_cpu_and_among_its_threads() -> None:
    before = read_usage([("hub", os.getpid())])
    started = time.monotonic()
    worker = threading.Thread(target=_spin, args=(0.3,))
    worker.start()
    worker.join()
    time.sleep(0.05)  # (switches: the waits above were voluntary)
    after = read_usage([("hub", os.getpid())])
    assert after.cpu["hub"] - before.cpu["hub"] >= 0.2
    assert after.switches["hub"] > before.switches["hub"]
    figures = per_second(before, after, time.monotonic() - started)
    assert set(figures) == {"hub"}
    assert figures["hub"]["cpu_ms_per_s"] > 0
    # The worker ended before the second reading, so this thread's own CPU is the busiest.
    assert len(figures["hub"]["busiest_threads_ms_per_s"]) >= 1


def test_figures_are_per_second_summed_per_role_and_leave_out_what_was_not_read_twice() -> None:
    before = Usage(
        cpu={"hub": 1.0, "agent-a": 2.0, "agent-b": 3.0},
        switches={"hub": 10, "agent-a": 20, "agent-b": 30},
        threads={("hub", 1): 1.0, ("agent-a", 2): 2.0, ("agent-b", 3): 3.0},
    )
    after = Usage(
        cpu={"hub": 1.5, "agent-a": 2.2, "agent-b": 3.4, "kubesim": 9.0},
        switches={"hub": 30, "agent-a": 24, "agent-b": 36, "kubesim": 99},
        threads={("hub", 1): 1.5, ("agent-a", 2): 2.2, ("agent-b", 3): 3.4, ("hub", 7): 5.0},
    )
    figures = per_second(before, after, 2.0)
    assert figures == {
        "hub": {"cpu_ms_per_s": 250.0, "switches_per_s": 10.0, "busiest_threads_ms_per_s": [250.0]},
        "agent": {
            "cpu_ms_per_s": 300.0,
            "switches_per_s": 5.0,
            "busiest_threads_ms_per_s": [200.0, 100.0],
        },
    }


def test_a_process_that_is_gone_is_left_out() -> None:
    assert read_usage([("gone", 2**22 + 12345)]) == Usage()


@pytest.mark.parametrize("seconds", ["0", "21"])
def test_a_window_that_is_empty_or_would_see_the_bursts_jobs_end_is_refused(
    seconds: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--seconds", seconds])
    assert exited.value.code == 2


@pytest.mark.slow
@pytest.mark.e2e
def test_a_small_federation_is_measured_idle_before_and_after_a_burst() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--workloads", "20", "--seconds", "1", "--nodes", "4"])
    assert code == 0
    result = json.loads(out.getvalue())
    assert result["burst"]["workloads"] == 20
    for window in ("empty", "after_burst"):
        assert set(result[window]) == {"hub", "agent", "kubesim"}
        for figures in result[window].values():
            # (idle for a second, a process may show no whole clock tick of CPU)
            assert figures["cpu_ms_per_s"] >= 0 and figures["switches_per_s"] >= 0
            assert figures["busiest_threads_ms_per_s"]
