"""When the agent's loop runs: a pass at most once per `cycle_min_interval`, counted from the
start of a pass, so events are coalesced but a long pass is not followed by a pause; a cycle
on time alone at the engine's wake-up or the next usage sample; the wait for events bounded
by the first wake-up (agent.pacing)."""

from __future__ import annotations

import pytest

from agent.pacing import (
    LIGHT_CYCLE_CPU_SECONDS,
    next_cycle_wakeup,
    pause_after_pass,
    runs_in_loop,
    wait_timeout,
)


def test_a_pass_shorter_than_the_interval_waits_out_the_rest_of_it() -> None:
    assert pause_after_pass(10.0, 10.02, 0.05) == pytest.approx(0.03)


def test_a_pass_longer_than_the_interval_is_followed_at_once() -> None:
    assert pause_after_pass(10.0, 10.3, 0.05) == 0.0


def test_a_cycle_is_due_at_the_engines_wakeup_or_the_next_usage_sample_whichever_is_first() -> None:
    assert next_cycle_wakeup(20.0, 15.0) == 15.0
    assert next_cycle_wakeup(12.0, 15.0) == 12.0
    assert next_cycle_wakeup(None, 15.0) == 15.0
    assert next_cycle_wakeup(12.0, None) == 12.0


def test_without_a_wakeup_or_a_sample_no_cycle_is_due_on_time_alone() -> None:
    assert next_cycle_wakeup(None, None) is None


def test_the_loop_waits_for_events_until_its_first_wakeup() -> None:
    assert wait_timeout((30.0, None, 12.0), 10.0) == pytest.approx(2.0)


def test_a_wakeup_already_due_is_not_waited_for() -> None:
    assert wait_timeout((5.0, 40.0), 10.0) == 0.0


def test_without_any_wakeup_the_loop_waits_for_the_next_event_however_long() -> None:
    assert wait_timeout((None, None), 10.0) is None


def test_a_small_cycle_after_a_cheap_one_runs_in_the_loop_anything_else_in_a_thread() -> None:
    assert runs_in_loop(0.0002, small=True)
    assert not runs_in_loop(0.0002, small=False)  # a rebuild, a burst, a deep queue
    assert not runs_in_loop(LIGHT_CYCLE_CPU_SECONDS, small=True)  # the last one was not cheap
